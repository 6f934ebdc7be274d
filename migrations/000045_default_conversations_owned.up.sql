-- A person's default conversation (user-<their id>) is theirs: one another user named
-- first, before only its person could, goes back to its person, and the grants that
-- other user gave in it end (a grant serves its conversation, whoever calls in it).
UPDATE grants g SET revoked_at = now(), revoked_by = 'migration 45: the conversation went back to its person'
FROM users u
WHERE g.conversation_id = 'user-' || u.id::text AND g.user_id IS DISTINCT FROM u.id AND g.revoked_at IS NULL;

UPDATE conversations c SET user_id = u.id, user_name = u.username
FROM users u
WHERE c.id = 'user-' || u.id::text AND c.user_id IS DISTINCT FROM u.id;
