GRANT INSERT ON audit_search TO toolwarden_app;
DROP FUNCTION audit_search_index(integer);
DROP FUNCTION audit_search_trim();
DROP FUNCTION audit_search_doc(text, text, text, text, text, json);
