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

// A key file that changed but does not load is read again for a wrong MAC once, not
// for each: anyone can send one.
func TestVerifyMACReadsABrokenFileOnce(t *testing.T) {
	t.Parallel()
	path, _ := legacyKeyFile(t)
	kr, err := LoadKeyring(path)
	if err != nil {
		t.Fatal(err)
	}
	kr.r()
	writeFile(t, path, "not a key\n", 0o600)
	if kr.VerifyMAC([]byte("x"), []byte("wrong")) {
		t.Fatal("a wrong MAC verified")
	}
	if f := kr.failed.Load(); f == nil || f.stamp != stampOf(path) {
		t.Fatal("the failed read of the changed file is not remembered")
	}
	kr.mu.Lock() // a second read would wait here (for ever: the test hangs)
	defer kr.mu.Unlock()
	if kr.VerifyMAC([]byte("x"), []byte("wrong")) {
		t.Fatal("a wrong MAC verified")
	}
}
