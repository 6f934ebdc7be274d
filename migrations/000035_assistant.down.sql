DROP TABLE tool_auto_enable_preferences;
DROP TABLE assistant_messages;
DROP TABLE assistant_conversations;
