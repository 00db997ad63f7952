// Package sample builds sample databases on a server: the realistic
// data the demo shows pgsprint on, and the benchmarks measure it on. Rows
// are generated server-side with generate_series, so building is bounded
// by the server, not by a client.
package sample

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pg"
)

// mixedChunk is the rows one INSERT of MixedJobs generates: small enough
// that jobs connections share the largest table evenly, large enough that
// a statement's start costs nothing.
const mixedChunk = 200_000

// Mixed builds the three-table dataset of a published pg_dump format
// comparison, built "as diverse as possible" because pg_dump does better
// with some data than with other: large_test_table (18 columns of names,
// emails, addresses, dates, salaries, notes), orders (13 columns) and
// activity_logs (13 columns with inet and long text), random strings of
// varying length, primary keys and 10 secondary indexes; every
// orders.customer_id and activity_logs.user_id is an id of
// large_test_table, so a foreign key holds. Scale 1 is about
// 1 GB. The demo loads a slice of it and the benchmarks the whole: what a
// newcomer first sees is what users see at size.
//
// It builds on jobs connections at once: the tables, then their rows as
// INSERT ... SELECT over ranges of generate_series (the server generates
// them; no row crosses the wire), then the keys and indexes, then ANALYZE.
func Mixed(ctx context.Context, connString string, scale float64, jobs int) error {
	people, orders, logs := Rows(1_000_000, scale), Rows(1_000_000, scale), Rows(450_000, scale)
	if err := ExecEach(ctx, connString,
		`CREATE TABLE large_test_table (
			id serial NOT NULL, first_name text, last_name text, email text, phone text,
			address text, city text, state text, zip_code text, country text,
			birth_date date, hire_date date, salary numeric(10,2), department text,
			job_title text, is_active boolean, notes text, created_at timestamptz)`,
		`CREATE TABLE orders (
			order_id serial NOT NULL, customer_id int NOT NULL, order_date timestamptz, status text,
			total_amount numeric(12,2), currency text, shipping_address text, billing_address text,
			payment_method text, discount numeric(5,2), tax numeric(10,2), notes text, updated_at timestamptz)`,
		`CREATE TABLE activity_logs (
			log_id bigserial NOT NULL, user_id int, ip_address inet, user_agent text, action text,
			resource text, status_code int, response_time_ms int, request_body text, referrer text,
			session_id uuid, created_at timestamptz, details text)`); err != nil {
		return err
	}
	var inserts []string
	for _, t := range []struct {
		sql  string
		rows int
	}{
		{fmt.Sprintf(`INSERT INTO large_test_table (first_name, last_name, email, phone, address, city, state,
			zip_code, country, birth_date, hire_date, salary, department, job_title, is_active, notes, created_at)
		SELECT %s, %s, %s || '@' || %s || '.com', '+1-' || (random()*1e9)::bigint, %s, %s, %s,
			lpad(((random()*99999)::int)::text, 5, '0'), %s,
			date '1960-01-01' + (random()*15000)::int, date '2000-01-01' + (random()*9000)::int,
			(random()*200000)::numeric(10,2), %s, %s, random() > 0.2, %s,
			timestamptz '2020-01-01' + random() * interval '1500 days'
		FROM generate_series(%%d, %%d)`,
			RandomText(4, 8), RandomText(4, 10), RandomText(5, 10), RandomText(4, 8), RandomText(10, 30), RandomText(4, 10), RandomText(2, 10),
			RandomText(4, 10), RandomText(4, 12), RandomText(5, 20), RandomText(0, 120)), people},
		{fmt.Sprintf(`INSERT INTO orders (customer_id, order_date, status, total_amount, currency, shipping_address,
			billing_address, payment_method, discount, tax, notes, updated_at)
		SELECT floor(random()*%d)::int + 1, timestamptz '2021-01-01' + random() * interval '1000 days',
			(ARRAY['new','paid','shipped','delivered','returned'])[1 + (random()*4)::int],
			(random()*5000)::numeric(12,2), (ARRAY['USD','EUR','GBP'])[1 + (random()*2)::int],
			%s, %s, (ARRAY['card','paypal','wire','cash'])[1 + (random()*3)::int],
			(random()*50)::numeric(5,2), (random()*500)::numeric(10,2), %s,
			timestamptz '2023-01-01' + random() * interval '600 days'
		FROM generate_series(%%d, %%d)`, people, RandomText(15, 40), RandomText(15, 40), RandomText(0, 150)), orders},
		{fmt.Sprintf(`INSERT INTO activity_logs (user_id, ip_address, user_agent, action, resource, status_code,
			response_time_ms, request_body, referrer, session_id, created_at, details)
		SELECT floor(random()*%d)::int + 1,
			('10.' || (random()*255)::int || '.' || (random()*255)::int || '.' || (random()*255)::int)::inet,
			'Mozilla/5.0 ' || %s, (ARRAY['view','click','login','logout','purchase'])[1 + (random()*4)::int],
			'/api/' || %s, (ARRAY[200,200,200,301,404,500])[1 + (random()*5)::int], (random()*2000)::int,
			%s, 'https://' || %s || '.example/', md5(random()::text)::uuid,
			timestamptz '2022-01-01' + random() * interval '900 days', %s
		FROM generate_series(%%d, %%d)`, people, RandomText(20, 60), RandomText(5, 20), RandomText(100, 900), RandomText(5, 15), RandomText(0, 300)), logs},
	} {
		for lo := 1; lo <= t.rows; lo += mixedChunk {
			inserts = append(inserts, fmt.Sprintf(t.sql, lo, min(lo+mixedChunk-1, t.rows)))
		}
	}
	if err := ExecParallel(ctx, connString, jobs, inserts); err != nil {
		return err
	}
	// The keys after the rows, as a restore builds them: the same schema
	// as columns declared PRIMARY KEY, without maintaining the index row
	// by row.
	if err := ExecParallel(ctx, connString, jobs, []string{
		`ALTER TABLE large_test_table ADD PRIMARY KEY (id)`,
		`ALTER TABLE orders ADD PRIMARY KEY (order_id)`,
		`ALTER TABLE activity_logs ADD PRIMARY KEY (log_id)`,
		`CREATE INDEX ON large_test_table (email)`,
		`CREATE INDEX ON large_test_table (last_name, first_name)`,
		`CREATE INDEX ON large_test_table (hire_date)`,
		`CREATE INDEX ON large_test_table (department)`,
		`CREATE INDEX ON orders (customer_id)`,
		`CREATE INDEX ON orders (order_date)`,
		`CREATE INDEX ON orders (status, order_date)`,
		`CREATE INDEX ON activity_logs (user_id)`,
		`CREATE INDEX ON activity_logs (created_at)`,
		`CREATE INDEX ON activity_logs (ip_address)`,
	}); err != nil {
		return err
	}
	return ExecEach(ctx, connString, `ANALYZE`)
}

// ExecEach runs statements one by one on a fresh connection: the datasets
// of the demo and of the benchmarks are built with it.
func ExecEach(ctx context.Context, connString string, stmts ...string) error {
	conn, err := pgx.Connect(ctx, connString)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("%.60s...: %w", s, err)
		}
	}
	return nil
}

// Rows scales a row count, at least 1: the datasets take a scale, not counts.
func Rows(base int, scale float64) int {
	return max(1, int(float64(base)*scale))
}

// RandomText is an SQL expression for a random string of min to min+spread
// characters, so that rows vary in length as real text does.
func RandomText(min, spread int) string {
	return fmt.Sprintf("substr(repeat(md5(random()::text), %d), 1, %d + (random() * %d)::int)", (min+spread)/32+1, min, spread)
}

// ExecParallel runs statements on jobs connections at once, each
// statement on its own, in the order given as connections come free: how
// a sample (and the benchmarks' TPC-H) loads at the speed of the server.
func ExecParallel(ctx context.Context, connString string, jobs int, stmts []string) error {
	connect := func(ctx context.Context) (*pgx.Conn, error) { return pgx.Connect(ctx, connString) }
	return pg.Parallel(ctx, jobs, stmts, connect, func(ctx context.Context, conn *pgx.Conn, queue <-chan string) error {
		for s := range queue {
			if _, err := conn.Exec(ctx, s); err != nil {
				return fmt.Errorf("%.60s...: %w", s, err)
			}
		}
		return nil
	})
}
