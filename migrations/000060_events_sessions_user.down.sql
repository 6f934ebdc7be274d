DROP INDEX events_sessions_user_idx;
