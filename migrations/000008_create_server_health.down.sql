DROP TABLE server_health;
