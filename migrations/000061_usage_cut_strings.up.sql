-- Until this release a call's request or response over 8 KB was stored as one JSON
-- string holding the first 8 KB of its text. The Logs tab masks values by their key
-- name (a "db_password") only in JSON it can read, so such a string showed them in
-- clear. Rows written since keep the cut request or response as JSON with those values
-- masked (usage.ForLog); the older strings are replaced by a note. Requests and
-- responses are always JSON objects, so a string is one of those cuts.
UPDATE tool_usage_logs SET
    request = CASE WHEN json_typeof(request) = 'string'
        THEN to_json('[cut before an upgrade, and not kept: its text could show secret values unmasked]'::text) ELSE request END,
    response = CASE WHEN json_typeof(response) = 'string'
        THEN to_json('[cut before an upgrade, and not kept: its text could show secret values unmasked]'::text) ELSE response END
WHERE json_typeof(request) = 'string' OR json_typeof(response) = 'string';
