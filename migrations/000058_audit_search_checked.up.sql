-- The free-text index (audit_search, migration 42) could be steered by what it holds.
-- Its indexer went on from the highest id indexed, and toolwarden_app could insert rows:
-- a row planted with an id ahead of the log's head made the indexer skip the real entry
-- that later got that id (hidden from every search), and when a superuser deleted the
-- log's tail and the ids were used again, the index described the deleted entries.
-- Now each pass of the indexer (audit.Log.IndexSearch) first checks that the newest
-- row indexed still holds the words of the entry with its id, finds the newest one that
-- does when it does not (a binary search: the rows indexed honestly are a prefix of the
-- log), and removes every row after it, to be indexed again from the log.

-- audit_search_doc is the words of an entry as indexed and as checked: the first 50,000
-- characters of its text (audit.SearchTextChars says why; a test checks the two agree).
CREATE FUNCTION audit_search_doc(actor_name text, action text, target_type text, target_id text,
                                 target_name text, payload json) RETURNS tsvector
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT to_tsvector('simple'::regconfig,
        left(audit_search_text(actor_name, action, target_type, target_id, target_name, payload), 50000))
$$;

-- audit_search_trim returns the id after which the log is to be indexed, having removed
-- the rows after it. It runs as the owner, as toolwarden_app may not delete from
-- audit_search (whatever it removes is indexed again, so it can hide no entry), and
-- takes the indexers' lock, so one run by anyone else cannot remove what an indexer
-- is writing. A row counts when the entry of the greatest id up to its id has a row
-- whose words are that entry's (no entry: it counts, there is nothing to index); the
-- newest row up to the head is tried first, which is the answer on every pass but
-- the one after a change, and then halves, so a pass reads a few rows, or about 2 log2
-- of the log's, not the whole index.
CREATE FUNCTION audit_search_trim() RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    lo   bigint := 0;
    hi   bigint;
    mid  bigint;
    good boolean;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('toolwarden.audit_search', 0));
    SELECT coalesce(max(s.id), 0) INTO hi FROM audit_search s
        WHERE s.id <= (SELECT coalesce(max(id), 0) FROM audit_log);
    mid := hi;
    WHILE lo < hi LOOP
        SELECT coalesce(s.doc = audit_search_doc(a.actor_name, a.action, a.target_type, a.target_id, a.target_name, a.payload), false)
            INTO good
            FROM (SELECT * FROM audit_log WHERE id <= mid ORDER BY id DESC LIMIT 1) a
            LEFT JOIN audit_search s ON s.id = a.id;
        IF NOT FOUND OR good THEN
            lo := mid;
        ELSE
            hi := mid - 1;
        END IF;
        mid := lo + (hi - lo + 1) / 2;
    END LOOP;
    DELETE FROM audit_search WHERE id > lo;
    RETURN lo;
END
$$;
REVOKE ALL ON FUNCTION audit_search_trim() FROM PUBLIC;

-- audit_search_index trims, then indexes up to n entries after the newest row that holds
-- its entry's words, and returns how many it indexed. It is the only way the
-- application adds to audit_search, which it may no longer insert into: the rows are
-- made here from audit_log, so none can be planted (a row for an entry not yet indexed
-- would leave those below it unindexed, as the trim counts from the newest row).
CREATE FUNCTION audit_search_index(n integer) RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    after bigint;
    added bigint;
BEGIN
    after := audit_search_trim();
    INSERT INTO audit_search (id, doc)
        SELECT id, audit_search_doc(actor_name, action, target_type, target_id, target_name, payload)
        FROM audit_log WHERE id > after ORDER BY id LIMIT n;
    GET DIAGNOSTICS added = ROW_COUNT;
    RETURN added;
END
$$;
REVOKE ALL ON FUNCTION audit_search_index(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION audit_search_index(integer) TO toolwarden_app;
REVOKE INSERT ON audit_search FROM toolwarden_app;

-- Both read and write the tables of this schema, and no temporary table a session made
-- with the same name. (audit_search_doc has no such setting: it would no longer be
-- inlined; it runs with theirs when they call it.)
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION audit_search_trim() SET search_path = %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION audit_search_index(integer) SET search_path = %I, pg_temp', current_schema());
END
$$;

-- What the application's role could plant before this migration, repaired once: rows past
-- the log's head, and every row from the first entry the old indexer skipped (a planted row
-- ahead made it skip the entries below the row's id, then carry on past it). Both are
-- found without computing any entry's words (an anti-join on ids), so this costs a scan of
-- ids, not migration 42's backfill; what is deleted is indexed again by the servers.
-- Words planted under an id the indexer had not reached, with no entry skipped, and words
-- left by a tail a superuser deleted before this migration, are not found so: deleting
-- audit_search's rows from an id on, as the owner, has them indexed again (docs/audit.md).
DELETE FROM audit_search WHERE id > (SELECT coalesce(max(id), 0) FROM audit_log);
DELETE FROM audit_search WHERE id >= (
    SELECT min(a.id) FROM audit_log a WHERE NOT EXISTS (SELECT 1 FROM audit_search s WHERE s.id = a.id));
