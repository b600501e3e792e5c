-- What an audited action changed, for the dashboard's Activity page: a
-- small JSON object (at most 4 KiB) of the object's name and each changed
-- field's value before and after; never a secret. NULL for entries written
-- before it was recorded.
ALTER TABLE audit_log ADD COLUMN detail TEXT;
