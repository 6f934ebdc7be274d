package secrets

import "testing"

// A MAC made by another process with a key it just added (a rotation's new primary)
// verifies at once, before this process's next look at the key file: an approval
// sealed on one replica is not taken for a tampered one on another.
func TestVerifyMACReadsANewKey(t *testing.T) {
	t.Parallel()
	path, _ := legacyKeyFile(t)
	behind, err := LoadKeyring(path)
	if err != nil {
		t.Fatal(err)
	}
	behind.r() // its look at the file is now recent
	if _, err := AddKeyToFile(path); err != nil {
		t.Fatal(err)
	}
	ahead, err := LoadKeyring(path)
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("execution 1: plan hash")
	mac := ahead.MAC(data)
	if !behind.VerifyMAC(data, mac) {
		t.Fatal("a MAC under a key just added to the file did not verify")
	}
	if behind.VerifyMAC([]byte("execution 1: another plan"), mac) {
		t.Fatal("a MAC verified for other data")
	}
}
