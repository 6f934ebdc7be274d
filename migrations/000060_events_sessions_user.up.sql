-- A websocket that follows the sessions topic only for its own checks replays the
-- sessions events about its person (events.SinceAbout): found by the payload's user_id,
-- a json field, that read parsed every sign-in of everyone since the page's cursor. The
-- index covers the sessions topic alone, so other events (every tool call writes two or
-- three) pay only for its predicate on insert.
CREATE INDEX events_sessions_user_idx ON events ((payload->>'user_id'), id) WHERE topic = 'sessions';
