package bench

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteTable writes the result as nccl-tests does: per size the time and the
// algorithm and bus bandwidths.
func WriteTable(w io.Writer, r Result) error {
	fmt.Fprintf(w, "all-reduce (sum, %s) on %d rank(s), %s %s, device %s: median of %d iterations after %d warm-up\n",
		r.DType, r.Ranks, r.Backend, r.Version, r.Device, r.Iters, r.Warmup)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "size\tcount\ttime (us)\tmin (us)\tmax (us)\talgbw (GB/s)\tbusbw (GB/s)\t")
	for _, row := range r.Rows {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.1f\t%.3f\t%.3f\t\n", humanBytes(row.Bytes), row.Count,
			row.MS*1e3, row.MinMS*1e3, row.MaxMS*1e3, row.AlgBWGBs, row.BusBWGBs)
	}
	return tw.Flush()
}

func humanBytes(b int64) string {
	switch {
	case b >= 1<<30 && b%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", b>>30)
	case b >= 1<<20 && b%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", b>>20)
	case b >= 1<<10 && b%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", b>>10)
	}
	return fmt.Sprintf("%d B", b)
}
