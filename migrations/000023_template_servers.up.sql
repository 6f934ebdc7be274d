-- Issue #19: servers of type template, whose tools an administrator defines in YAML
-- (services/template, docs/templates.md) and Toolwarden serves in-process. The YAML is
-- the whole definition of such a server, stored as written (it is shown, exported and
-- diffed like a command line, so it holds no secret values), at most 256 KiB as
-- services/template accepts. Only template servers have one.
ALTER TABLE mcp_servers DROP CONSTRAINT mcp_servers_server_type_check,
    ADD CONSTRAINT mcp_servers_server_type_check
        CHECK (server_type IN ('stdio', 'sse', 'streamable_http', 'template'));
ALTER TABLE mcp_servers ADD COLUMN template text NOT NULL DEFAULT '',
    ADD CONSTRAINT mcp_servers_template_size_check CHECK (octet_length(template) <= 262144),
    ADD CONSTRAINT mcp_servers_template_type_check CHECK ((server_type = 'template') = (template <> ''));
