package e2e

import (
	"testing"

	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }
