-- Leases: a replica's reservation of a slice of an account's balance, from
-- which it serves requests' holds in memory. A lease starts empty and is
-- shrunk by the records it paid for, so a reservation may now hold 0.
ALTER TABLE reservations
    DROP CONSTRAINT reservations_amount_nanos_check,
    ADD CONSTRAINT reservations_amount_nanos_check CHECK (amount_nanos >= 0);
