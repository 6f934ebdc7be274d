package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolwarden/toolwarden/services/audit"
)

// CheckpointConfig says where and how often the server signs the audit chain's head
// (docs/security.md, Signed checkpoints).
type CheckpointConfig struct {
	// Dir receives the checkpoint files; "" writes none. The audit page's and API's
	// check reaches the newest one here (audit.Log.UseCheckpoints), written or not,
	// once KeyFile or its public key is there to trust.
	Dir string
	// KeyFile is the Ed25519 signing key, created 0600 on first use with its public key
	// beside it (audit.OpenSigner).
	KeyFile string
	// PublicKey is the public key file (PEM) of the key the page's check trusts
	// checkpoints from; "" trusts KeyFile's. For checkpoints signed elsewhere and put
	// into Dir (Every 0): the signing key then never is on this machine.
	PublicKey string
	// Every is how often; 0 writes none (serve --checkpoint-every 0).
	Every time.Duration
}

// checkpoints is the component that writes them. It runs in every replica
// (EveryReplica): a checkpoint is worth most on a disk the database cannot reach, and
// each replica's data dir is one more such disk, with its own key; a Once job would
// scatter one series over whichever replica ran it.
func (a *App) checkpoints() (Component, error) {
	cc := a.cfg.Checkpoints
	signer, err := audit.OpenSigner(cc.KeyFile)
	if err != nil {
		return Component{}, err
	}
	// The page would refuse every checkpoint this server signs.
	if cc.PublicKey != "" {
		trusted, err := audit.ReadPublicKey(cc.PublicKey)
		if err != nil {
			return Component{}, err
		}
		if !trusted.Equal(signer.Public()) {
			return Component{}, fmt.Errorf("the checkpoint public key %s (%s) is not that of the key this server signs checkpoints with, %s (%s): "+
				"give that key's .pub, or --checkpoint-every 0 when checkpoints are signed elsewhere",
				cc.PublicKey, audit.Fingerprint(trusted), cc.KeyFile, audit.Fingerprint(signer.Public()))
		}
	}
	w := audit.NewCheckpointer(a.Pool, signer, cc.Dir)
	write := func(ctx context.Context) {
		path, err := w.Write(ctx)
		switch {
		case errors.Is(err, audit.ErrChainRewound):
			a.log.Error("audit: the chain was cut back or rewritten since the last checkpoint; no new checkpoint is signed", "err", err)
		case err != nil && ctx.Err() == nil:
			a.log.Warn("audit: checkpoint not written", "err", err)
		case path != "":
			a.log.Debug("audit: checkpoint written", "path", path)
		}
	}
	return Component{Name: "checkpoints", Run: func(ctx context.Context) error {
		write(ctx)
		t := time.NewTicker(cc.Every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
				write(ctx)
			}
		}
	}}, nil
}
