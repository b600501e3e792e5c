-- A key's token limits: tokens per UTC minute (TPM) and per UTC day,
-- counted as prompt plus completion tokens. NULL: Off (the plan's default
-- applies).

ALTER TABLE keys ADD COLUMN tpm_limit INTEGER;
ALTER TABLE keys ADD COLUMN tokens_per_day INTEGER;
