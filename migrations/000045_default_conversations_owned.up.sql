-- A person's default conversation (user-<their id>) is theirs: one another user named
-- first, before only its person could, goes back to its person.
UPDATE conversations c SET user_id = u.id, user_name = u.username
FROM users u
WHERE c.id = 'user-' || u.id::text AND c.user_id IS DISTINCT FROM u.id;
