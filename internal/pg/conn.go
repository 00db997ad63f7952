// Package pg connects to PostgreSQL the way libpq tools do and reads what the
// dump and restore pipelines need from the catalog, all through pgx.
package pg

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ConnOptions names a server as pg_dump's -d, -h, -p and -U do. DSN may be a
// database name, a keyword/value string or a URI; PG* variables, .pgpass and
// service files apply through pgx.
type ConnOptions struct {
	DSN  string
	Host string
	Port string
	User string
	// Role, as pg_dump's and pg_restore's --role, is the role every
	// session takes after connecting (SET ROLE), pgsprint's and its
	// children's alike: the user logs in, the role owns and reads.
	Role string
}

func isConnString(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://") || strings.Contains(s, "=")
}

func isURI(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// quoteValue quotes a keyword/value connection string value per libpq rules.
func quoteValue(v string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

// connString merges the flags and DSN into one string for pgx. As in pg_dump,
// values in a connection string given to -d win over -h/-p/-U.
func (o ConnOptions) connString() (string, error) {
	var kv []string
	add := func(k, v string) {
		if v != "" {
			kv = append(kv, k+"="+quoteValue(v))
		}
	}
	add("host", o.Host)
	add("port", o.Port)
	add("user", o.User)
	switch {
	case isURI(o.DSN):
		if len(kv) > 0 {
			return "", errors.New("-h, -p and -U cannot be combined with a connection URI: put them in the URI")
		}
		return o.DSN, nil
	case isConnString(o.DSN):
		kv = append(kv, o.DSN)
	default:
		add("dbname", o.DSN)
	}
	return strings.Join(kv, " "), nil
}

// ConnString is the one connection string the options amount to (what
// Config parses), for a tool that takes a string.
func (o ConnOptions) ConnString() (string, error) { return o.connString() }

// Config parses the options into a pgx configuration.
func (o ConnOptions) Config() (*pgx.ConnConfig, error) {
	s, err := o.connString()
	if err != nil {
		return nil, err
	}
	cfg, err := pgx.ParseConfig(s)
	if err != nil {
		if tlsErr := tlsConfigError(err); tlsErr != "" {
			return nil, fmt.Errorf("invalid connection options: TLS: %s", tlsErr)
		}
		return nil, fmt.Errorf("invalid connection options: %w", err)
	}
	if o.Role != "" {
		// A startup parameter is SET ROLE before the first statement;
		// ChildConn passes it to pg_dump, pg_restore and psql.
		cfg.RuntimeParams["role"] = o.Role
	}
	return cfg, nil
}

// Connect opens one connection with the session settings every pgsprint
// connection uses: no timeouts that would kill a long COPY, ISO dates and
// row security off (so that a policy can never silently hide rows from a
// dump; PostgreSQL raises an error instead).
func Connect(ctx context.Context, cfg *pgx.ConnConfig) (*pgx.Conn, error) {
	cfg = cfg.Copy()
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	for k, v := range map[string]string{
		"application_name":                    "pgsprint",
		"DateStyle":                           "ISO",
		"IntervalStyle":                       "postgres",
		"extra_float_digits":                  "3",
		"statement_timeout":                   "0",
		"lock_timeout":                        "0",
		"idle_in_transaction_session_timeout": "0",
		"row_security":                        "off",
	} {
		if _, set := cfg.RuntimeParams[k]; !set {
			cfg.RuntimeParams[k] = v
		}
	}
	// pgx reads and writes Go strings as UTF8 and never sets
	// client_encoding itself, while a server's default is the database's
	// encoding: catalog names from a LATIN1 database would arrive as
	// LATIN1 bytes. Every connection is UTF8 whatever the user's
	// connection string says; COPY data names its own encoding.
	cfg.RuntimeParams["client_encoding"] = "UTF8"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, &ConnectError{Target: Describe(cfg), Err: err, Timeout: cfg.ConnectTimeout, SSLMode: sslMode(&cfg.Config)}
	}
	// A SQL_ASCII database converts nothing but checks what it sends a
	// UTF8 client: its bytes, which need not be UTF8, pass only to a
	// SQL_ASCII client, and are kept as they are.
	if conn.PgConn().ParameterStatus("server_encoding") == "SQL_ASCII" {
		if _, err := conn.Exec(ctx, "SET client_encoding TO 'SQL_ASCII'"); err != nil {
			conn.Close(context.WithoutCancel(ctx))
			return nil, &ConnectError{Target: Describe(cfg), Err: err}
		}
	}
	return conn, nil
}

// ConnectError is a failure to connect, kept distinct so that the command
// can exit with the connection-error code.
type ConnectError struct {
	Target  string
	Err     error
	Timeout time.Duration // connect_timeout, if one was set
	// SSLMode is the connection's sslmode, for a TLS failure's message
	// ("" when unknown).
	SSLMode string
}

// Error names the target and the server's own message when there is one,
// without pgx's repetition of the socket path, on one line: pgx joins one
// error per attempt (TLS then plain text with sslmode=prefer, each address
// of a host name) with newlines, often the same text twice.
func (e *ConnectError) Error() string {
	var pgErr *pgconn.PgError
	if errors.As(e.Err, &pgErr) {
		return "connect to " + e.Target + ": " + pgErr.Message
	}
	if e.Timeout > 0 && errors.Is(e.Err, context.DeadlineExceeded) {
		return fmt.Sprintf("connect to %s: no answer within connect_timeout (%s)", e.Target, e.Timeout)
	}
	if why := tlsFailure(e.Err, e.SSLMode); why != "" {
		return "connect to " + e.Target + ": TLS: " + why
	}
	inner := e.Err
	if u := errors.Unwrap(inner); u != nil {
		inner = u
	}
	var parts []string
	for _, l := range strings.Split(inner.Error(), "\n") {
		l = strings.TrimSpace(l)
		seen := l == ""
		for _, p := range parts {
			seen = seen || strings.HasSuffix(p, l)
		}
		if !seen {
			parts = append(parts, l)
		}
	}
	return "connect to " + e.Target + ": " + strings.Join(parts, "; ")
}

func (e *ConnectError) Unwrap() error { return e.Err }

// Describe names a server and database for messages, without the password.
func Describe(cfg *pgx.ConnConfig) string {
	return fmt.Sprintf("database %q on %s:%d as %q", cfg.Database, cfg.Host, cfg.Port, cfg.User)
}

// ChildConn returns the -d argument and extra environment for pg_dump,
// pg_restore and psql run against the same server and database as cfg.
//
// The child gets the user's own connection string, so that everything libpq
// understands (sslrootcert, sslcert, target_session_attrs, service, ...)
// reaches it unchanged, with dbname set to cfg's (a restore --create
// retargets it). The password travels in PGPASSWORD, never on a command
// line: a URI loses its password, and a keyword string that embeds one is
// replaced by one rebuilt from the parsed configuration (which keeps
// host, port, user, dbname and sslmode but not TLS file options: pass
// those in PGSSLROOTCERT and friends, or the password in PGPASSWORD).
func ChildConn(cfg *pgx.ConnConfig) (dsn string, env []string) {
	if cfg.Password != "" {
		env = append(env, "PGPASSWORD="+cfg.Password)
	}
	if role := cfg.RuntimeParams["role"]; role != "" {
		opts := strings.TrimSpace(os.Getenv("PGOPTIONS") + " -c role=" + escapeOption(role))
		env = append(env, "PGOPTIONS="+opts)
	}
	orig := cfg.ConnString()
	if isURI(orig) {
		if u, err := url.Parse(orig); err == nil {
			if u.User != nil {
				u.User = url.User(u.User.Username())
			}
			u.Path = "/" + cfg.Database
			u.RawPath = ""
			return u.String(), env
		}
	}
	if orig != "" && !isURI(orig) && !strings.Contains(orig, "password") {
		return orig + " dbname=" + quoteValue(cfg.Database), env
	}
	return Conninfo(cfg), env
}

// WithSetting adds "-c name=value" to the PGOPTIONS of a child's
// environment env (ChildConn's), after what env or pgsprint's own
// environment already set there, for a child whose session needs a setting
// (pg_restore's pre-data runs with synchronous_commit off).
func WithSetting(env []string, name, value string) []string {
	opts, at := os.Getenv("PGOPTIONS"), -1
	for i, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PGOPTIONS="); ok {
			opts, at = v, i
		}
	}
	kv := "PGOPTIONS=" + strings.TrimSpace(opts+" -c "+name+"="+escapeOption(value))
	out := append([]string{}, env...)
	if at >= 0 {
		out[at] = kv
		return out
	}
	return append(out, kv)
}

// escapeOption escapes a value for libpq's options (PGOPTIONS), where
// spaces separate arguments and a backslash escapes.
func escapeOption(v string) string {
	return strings.NewReplacer(`\`, `\\`, " ", `\ `).Replace(v)
}

// sslMode recovers libpq's sslmode from what pgx made of it.
func sslMode(c *pgconn.Config) string {
	plainFallback := false
	for _, f := range c.Fallbacks {
		if f.TLSConfig == nil {
			plainFallback = true
		}
	}
	switch {
	case c.TLSConfig == nil && len(c.Fallbacks) > 0:
		return "allow"
	case c.TLSConfig == nil:
		return "disable"
	case plainFallback:
		return "prefer"
	}
	return tlsMode(c.TLSConfig)
}

func tlsMode(t *tls.Config) string {
	switch {
	case t.InsecureSkipVerify && t.VerifyPeerCertificate == nil:
		return "require"
	case t.InsecureSkipVerify:
		return "verify-ca"
	}
	return "verify-full"
}

// tlsFailure says, in one line with the next step, why a connection
// failed in its TLS handshake: the server refused TLS, or its certificate
// could not be verified (sslmode=verify-ca or verify-full); "" for any
// other failure. pgx gives the first as "server refused TLS connection"
// and the second as the x509 error wrapped in "failed to write startup
// message".
func tlsFailure(err error, sslmode string) string {
	mode := ""
	if sslmode != "" {
		mode = " (sslmode=" + sslmode + ")"
	}
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	switch {
	case strings.Contains(err.Error(), "server refused TLS connection"):
		return "the server refused TLS" + mode + ": turn ssl = on in its postgresql.conf (with ssl_cert_file and ssl_key_file), or connect with sslmode=prefer if plain text is acceptable"
	case errors.As(err, &host), strings.Contains(err.Error(), "x509: certificate is valid for"):
		return fmt.Sprintf("the server's certificate does not name the host connected to%s (%s): connect by a name the certificate holds, or use sslmode=verify-ca", mode, x509Cause(err))
	case errors.As(err, &unknown), errors.As(err, &invalid), errors.As(err, &verify), strings.Contains(err.Error(), "x509: "):
		return fmt.Sprintf("the server's certificate cannot be verified%s (%s): give in sslrootcert the certificate of the authority that signed it", mode, x509Cause(err))
	}
	return ""
}

// x509Cause is the x509 part of a verification error's text.
func x509Cause(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "x509: "); i >= 0 {
		return msg[i:]
	}
	return msg
}

// tlsConfigError says why pgx could not set up TLS from the connection
// options (a root certificate, client certificate or key that cannot be
// read), with the next step; "" for any other parse error.
func tlsConfigError(err error) string {
	msg := err.Error()
	i := strings.Index(msg, "failed to configure TLS (")
	if i < 0 {
		return ""
	}
	why := strings.TrimSuffix(msg[i+len("failed to configure TLS ("):], ")")
	for _, f := range []struct{ prefix, option string }{{"unable to read CA file: ", "sslrootcert"}, {"unable to read cert: ", "sslcert"}, {"unable to read sslkey: ", "sslkey"}} {
		if rest, ok := strings.CutPrefix(why, f.prefix); ok {
			var pe *os.PathError
			if errors.As(err, &pe) {
				return fmt.Sprintf("%s %s cannot be read (%s): give the file's path in %s, readable by this user", f.option, pe.Path, pe.Err, f.option)
			}
			return fmt.Sprintf("%s cannot be read (%s): give the file's path in %s", f.option, rest, f.option)
		}
	}
	return why + ": check the ssl options of the connection string"
}
