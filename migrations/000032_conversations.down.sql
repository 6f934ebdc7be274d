DROP TABLE IF EXISTS conversations;
