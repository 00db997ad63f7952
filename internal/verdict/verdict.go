// Package verdict is what a check found, one type for every check that
// refuses a doomed run: a stage or an engine runs its checks up front and
// refuses with the failed ones (follow's requirements), and preflight
// prints the same verdicts as a checklist, one line each. One type, so
// that a check's verdict reaches preflight as the run reads it, with no
// copy between two look-alike structs.
package verdict

import "errors"

// Item is one check's verdict, one line of a checklist: passed (Detail
// says what was found), a risk the run may survive (Warning), or failed
// (Err names the cause and the fix, in one line).
type Item struct {
	Name    string
	Detail  string
	Warning bool
	Err     error
}

// Pass is a check that passed, detail saying what was found.
func Pass(name, detail string) Item { return Item{Name: name, Detail: detail} }

// Warn is a risk the run may survive, detail saying which.
func Warn(name, detail string) Item { return Item{Name: name, Detail: detail, Warning: true} }

// Fail is a check that stops the run, err naming the cause and the fix.
func Fail(name string, err error) Item { return Item{Name: name, Err: err} }

// Failed joins the errors of the failed items (nil when none failed): what
// a run refuses with when a check it runs up front fails.
func Failed(items []Item) error {
	var errs []error
	for _, it := range items {
		if it.Err != nil {
			errs = append(errs, it.Err)
		}
	}
	return errors.Join(errs...)
}
