// Package migrations embeds the SQL migrations applied by golang-migrate on start.
package migrations

import "embed"

// FS holds every NNNNNN_name.up.sql / .down.sql file in this directory.
//
//go:embed *.sql
var FS embed.FS
