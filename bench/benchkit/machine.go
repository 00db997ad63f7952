package benchkit

import (
	"time"

	"github.com/pgsprint/pgsprint/internal/progress"
)

// machineBusy is the busy CPU time of all cores since boot
// (progress.MachineBusy): its difference around a step is the step's
// machine CPU, servers included.
func machineBusy() time.Duration { return progress.MachineBusy() }
