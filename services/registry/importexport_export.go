package registry

// Export: every server registration written as the native YAML file.

import (
	"bytes"
	"context"
	"fmt"

	"go.yaml.in/yaml/v3"

	"github.com/toolwarden/toolwarden/services/db"
)

// exportHeader opens every exported file: the file is meant to be read, diffed and
// edited by people, who need to know why the secrets look empty.
const exportHeader = `# Toolwarden MCP servers: written by 'toolwarden export', read by 'toolwarden import'.
#
# Secret values are never exported. env and headers list each secret by name with a
# null value, and an auth block never holds its token. On import:
#   - a null value keeps the value already stored for that name;
#   - a name that is not stored yet is skipped with a warning: set it after import;
#   - a value written here replaces the stored one; 'toolwarden import' expands
#     ${env:NAME} and ${NAME} from its environment, so secrets can come from CI
#     (never Toolwarden's own settings: DATABASE_URL, TOOLWARDEN_*, PG*);
#   - a name removed from the file removes that secret.
`

// configFile is the native format. Field order here is the order in the file.
type configFile struct {
	Version int            `yaml:"version"`
	Servers []configServer `yaml:"servers"`
}

type configServer struct {
	Name             string             `yaml:"name"`
	Type             string             `yaml:"type"`
	Description      string             `yaml:"description,omitempty"`
	Command          string             `yaml:"command,omitempty"`
	Args             []string           `yaml:"args,omitempty,flow"`
	WorkingDir       string             `yaml:"working_dir,omitempty"`
	URL              string             `yaml:"url,omitempty"`
	Template         string             `yaml:"template,omitempty"`
	Env              map[string]*string `yaml:"env,omitempty"`
	Headers          map[string]*string `yaml:"headers,omitempty"`
	Auth             *configAuth        `yaml:"auth,omitempty"`
	TimeoutMS        int                `yaml:"timeout_ms"`
	Retries          int                `yaml:"retries"`
	HealthIntervalMS int                `yaml:"health_interval_ms"`
	Enabled          bool               `yaml:"enabled"`
	Trusted          bool               `yaml:"trusted"`
	AutoEnable       bool               `yaml:"auto_enable,omitempty"` // written only when on
}

type configAuth struct {
	Type   string `yaml:"type"`
	Header string `yaml:"header,omitempty"`
}

// Export writes every registered server in the native format. The output depends only
// on the registrations: servers by name, keys in a fixed order, no timestamps or ids,
// so exporting an unchanged database twice gives identical bytes and a diff in version
// control shows only real changes. It decrypts nothing.
func (s *Service) Export(ctx context.Context) ([]byte, error) {
	list, err := s.ExportServers(ctx)
	if err != nil {
		return nil, err
	}
	f := configFile{Version: ConfigVersion, Servers: list}
	var buf bytes.Buffer
	buf.WriteString(exportHeader)
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(f); err != nil {
		return nil, fmt.Errorf("registry: export: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("registry: export: %w", err)
	}
	return buf.Bytes(), nil
}

// ServerEntry is one server as the native file holds it (the YAML encoding of an item
// of its servers list).
type ServerEntry = configServer

// ExportServers lists every registered server as Export writes it, by name, for a file
// that carries more than servers (services/configcode). It decrypts nothing.
func (s *Service) ExportServers(ctx context.Context) ([]ServerEntry, error) {
	list, err := allServers(ctx, s.pool)
	if err != nil {
		return nil, err
	}
	out := make([]configServer, 0, len(list))
	for _, sv := range list {
		if sv.Type == TypeBuiltin {
			continue // Toolwarden creates it; a file never carries it
		}
		cs := configServer{Name: sv.Name, Type: sv.Type, Description: sv.Description,
			TimeoutMS: sv.TimeoutMS, Retries: sv.Retries, HealthIntervalMS: sv.HealthIntervalMS,
			Enabled: sv.Enabled, Trusted: sv.Trusted, AutoEnable: sv.AutoEnable}
		switch sv.Type {
		case TypeStdio:
			cs.Command, cs.Args, cs.WorkingDir = sv.Command, sv.Args, sv.WorkingDir
		case TypeTemplate:
			cs.Template = sv.Template
		default:
			cs.URL = sv.URL
			if sv.AuthType != AuthNone && sv.AuthType != "" {
				cs.Auth = &configAuth{Type: sv.AuthType, Header: sv.AuthHeader}
			}
		}
		cs.Env, cs.Headers = namesOnly(sv.Env), namesOnly(sv.Headers)
		out = append(out, cs)
	}
	return out, nil
}

// namesOnly maps each secret name to nil: the value is not exported.
func namesOnly(m map[string]string) map[string]*string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]*string, len(m))
	for k := range m {
		out[k] = nil
	}
	return out
}

func allServers(ctx context.Context, q db.Querier) ([]Server, error) {
	rows, err := q.Query(ctx, `/* registry.AllServers */ SELECT `+serverColumns+` FROM mcp_servers s ORDER BY s.name`)
	if err != nil {
		return nil, fmt.Errorf("registry: list servers: %w", err)
	}
	list, err := collectServers(rows)
	if err != nil {
		return nil, fmt.Errorf("registry: list servers: %w", err)
	}
	return list, nil
}
