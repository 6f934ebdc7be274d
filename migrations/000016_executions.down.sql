DROP TABLE IF EXISTS settings;
DROP TABLE IF EXISTS tool_compensations;
DROP TABLE IF EXISTS tool_calls;
DROP TABLE IF EXISTS executions;
