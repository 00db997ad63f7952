package results

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
)

// CSVHeader is the first line of WriteCSV's output: the columns of the
// published comparison (format, compression, level, backup/restore/total
// seconds, backup/database/restored bytes, size ratio), then client CPU,
// peak RSS, the tool, the dataset and the status.
var CSVHeader = []string{
	"format", "compression", "level",
	"backup_seconds", "restore_seconds", "total_seconds",
	"backup_bytes", "database_bytes", "restored_database_bytes", "size_ratio",
	"backup_client_cpu_seconds", "restore_client_cpu_seconds", "client_cpu_seconds", "peak_rss_bytes",
	"tool", "dataset", "status",
}

// WriteCSV writes rows with CSVHeader. Numbers of rows that did not verify
// are left empty.
func WriteCSV(w io.Writer, rows []Row) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVHeader); err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	for _, r := range rows {
		level := ""
		if r.Level != 0 {
			level = strconv.Itoa(r.Level)
		}
		rec := []string{r.Format, r.Compression, level}
		if r.OK() {
			backup, bytes := f(r.BackupSeconds), i(r.BackupBytes)
			ratio := strconv.FormatFloat(r.SizeRatio(), 'f', 4, 64)
			if r.IsClone() {
				backup, bytes, ratio = "", "", ""
			}
			rec = append(rec, backup, f(r.RestoreSeconds), f(r.Total()), bytes, i(r.DatabaseBytes), i(r.RestoredBytes), ratio,
				f(r.BackupCPU), f(r.RestoreCPU), f(r.ClientCPU()), i(r.PeakRSS))
		} else {
			rec = append(rec, "", "", "", "", "", "", "", "", "", "", "")
		}
		rec = append(rec, r.Tool, r.Dataset, r.Status)
		if err := cw.Write(rec); err != nil {
			return fmt.Errorf("write csv: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	return nil
}
