DROP TABLE IF EXISTS login_failures;
