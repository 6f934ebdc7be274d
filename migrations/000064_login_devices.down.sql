DROP TABLE IF EXISTS login_account_throttles;
DROP TABLE IF EXISTS login_devices;
