-- The budget windows a change of the account's time zone left in force:
-- per period, the window current at the change, which lasts to its end
-- before the new zone's windows start ("day:<start>:<end> week:…", Unix
-- seconds; '' for none). See package budget/calendar.
ALTER TABLE accounts ADD COLUMN timezone_kept TEXT NOT NULL DEFAULT '';
