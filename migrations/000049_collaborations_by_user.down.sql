DROP INDEX IF EXISTS collaborations_user;
