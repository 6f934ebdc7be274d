package app

import (
	"context"
	"errors"
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
