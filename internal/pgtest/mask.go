package pgtest

// MaskSQL creates schema crm for the masking tests: users with personal
// data (a unique e-mail that logins reference by a foreign key, a name, a
// phone in a varchar, free text with tabs, newlines and backslashes, a
// date, a number, a token), logins referencing users by e-mail, and a
// partitioned table of events with e-mails (no key). Every original
// e-mail ends in MaskDomain, every name holds MaskSurname, every phone
// starts with MaskPhone and every bio holds MaskBio, for tests that look
// for them where they must not be.
func MaskSQL() string {
	return `
CREATE SCHEMA crm;
CREATE TABLE crm.users (id int PRIMARY KEY, email text NOT NULL UNIQUE, full_name text, phone varchar(20),
	bio text, born date, score int, api_token text);
CREATE TABLE crm.logins (id int PRIMARY KEY, user_email text REFERENCES crm.users (email), at timestamptz, ip text);
CREATE TABLE crm.events (id int, at date, email text, PRIMARY KEY (id, at)) PARTITION BY RANGE (at);
CREATE TABLE crm.events_2025 PARTITION OF crm.events FOR VALUES FROM ('2025-01-01') TO ('2026-01-01');
CREATE TABLE crm.events_2026 PARTITION OF crm.events FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');
INSERT INTO crm.users SELECT i, 'user' || i || '@` + MaskDomain + `', 'Person' || i || ' ` + MaskSurname + `',
	'` + MaskPhone + `' || lpad(i::text, 4, '0'),
	CASE WHEN i % 3 = 0 THEN NULL ELSE E'` + MaskBio + ` ' || i || E'\tsecond\\part\nline' END,
	date '1980-01-01' + i * 37, i, md5(i::text)
	FROM generate_series(1, 200) i;
INSERT INTO crm.logins SELECT i, CASE WHEN i % 10 = 0 THEN NULL ELSE 'user' || (i % 200 + 1) || '@` + MaskDomain + `' END,
	timestamptz '2026-01-01 12:34:56+00' + i * interval '1 day', '10.0.' || (i % 250) || '.1'
	FROM generate_series(1, 400) i;
INSERT INTO crm.events SELECT i, date '2025-06-01' + i, 'user' || (i % 200 + 1) || '@` + MaskDomain + `' FROM generate_series(1, 300) i;
`
}

// The marks of MaskSQL's original values.
const (
	MaskDomain  = "corp.example.org"
	MaskSurname = "Realsurname"
	MaskPhone   = "+44 20 7946 "
	MaskBio     = "Biography"
)

// MaskRules masks every personal column of MaskSQL, one rule a line, as a
// --mask-file holds them (api_token is hashed, logins.ip set to NULL).
const MaskRules = `# crm's personal data
crm.users.email = email
crm.logins.user_email = email
crm.events.email = email
crm.users.full_name = name
crm.users.phone = phone
crm.users.bio = text
crm.users.born = dateshift:30
crm.users.score = number:1:100
crm.users.api_token = hash
crm.logins.ip = null
`
