-- How many call records a rolled-up day had when it was rolled: a record written later
-- (a call that waited hours for a person ends after its day was rolled) shows as a
-- different count, and the day is rolled again.
ALTER TABLE usage_daily_done ADD COLUMN usage_rows bigint;
