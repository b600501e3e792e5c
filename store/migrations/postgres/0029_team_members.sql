-- The people of a team: a team lists some of its account's members, for
-- grouping and the views only (a member's role alone says what it may
-- do). A member may be in several teams. Deleting the team or the member
-- deletes its rows.
CREATE TABLE team_members (
    team_id    TEXT NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    member_id  TEXT NOT NULL REFERENCES members (id) ON DELETE CASCADE,
    created_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (team_id, member_id)
);

CREATE INDEX team_members_member ON team_members (member_id);
