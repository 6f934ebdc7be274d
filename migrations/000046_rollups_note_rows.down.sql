ALTER TABLE usage_daily_done DROP COLUMN usage_rows;
