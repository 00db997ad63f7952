package restore

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// isPrivilegeError reports whether err is about ownership or privileges:
// what a restore as a role that does not own the archive's objects meets.
func isPrivilegeError(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42501" { // insufficient_privilege
		return true
	}
	msg := err.Error()
	for _, s := range []string{"must be member of role", "must be owner of", "permission denied", "must be superuser"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return strings.Contains(msg, "role \"") && strings.Contains(msg, "\" does not exist")
}

// explain adds what to do to a failure the user can act on: a target
// whose encoding (targetEncoding, once pre-data has looked; "" before)
// cannot hold the text of an archive in archiveEncoding, or a role that
// may not take the archive's ownership and privileges.
func explain(err error, archiveEncoding, targetEncoding string, opts Options) error {
	var refusal EncodingError
	switch {
	case errors.As(err, &refusal):
		return err
	case IsEncodingError(err) && targetEncoding != "" && targetEncoding != archiveEncoding:
		return fmt.Errorf("%w (this archive's text is %s, which a %s database cannot hold: restore into a %s database)", err, archiveEncoding, targetEncoding, WideEnough(archiveEncoding))
	case missingRole(err) != "" && !(opts.NoOwner && opts.NoACL):
		return fmt.Errorf("%w (the archive's objects name role %q, which the target server lacks: create it first (dump --all carries the roles), or leave out ownership and privileges with -O (--no-owner) and -x (--no-privileges))", err, missingRole(err))
	case isPrivilegeError(err) && !(opts.NoOwner && opts.NoACL):
		return fmt.Errorf("%w (restoring as a role that does not own the archive's objects? -O (--no-owner) and -x (--no-privileges) leave out ownership and privileges)", err)
	case opts.UseList != "" && strings.Contains(err.Error(), "violates foreign key constraint"):
		return fmt.Errorf("%w (the -L list keeps this foreign key but not all the rows it refers to: keep the referenced table's TABLE DATA entry, or comment out the FK CONSTRAINT entry)", err)
	}
	return err
}

// missingRole is the role that err says does not exist, or "": the
// server quotes the name as it is, quotes inside it included.
func missingRole(err error) string {
	msg := err.Error()
	i := strings.Index(msg, `role "`)
	j := strings.Index(msg, `" does not exist`)
	if i < 0 || j < i+len(`role "`) {
		return ""
	}
	return msg[i+len(`role "`) : j]
}
