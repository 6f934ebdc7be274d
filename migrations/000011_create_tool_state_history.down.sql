DROP TABLE tool_state_history;
