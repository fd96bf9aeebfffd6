package bench

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteTable writes the result as nccl-tests does: per size the time and the
// algorithm and bus bandwidths.
func WriteTable(w io.Writer, r Result) error {
	how := fmt.Sprintf("median of %d iterations after %d warm-up, each waited for", r.Iters, r.Warmup)
	if r.Mode == ModeNCCLTests {
		how = fmt.Sprintf("%d iterations back to back after %d warm-up and a barrier, one wait (nccl-tests' timing)", r.Iters, r.Warmup)
	}
	fmt.Fprintf(w, "all-reduce (sum, %s) on %d rank(s), %s %s, device %s: %s; time = the least over ranks, skew = the most less the least\n",
		r.DType, r.Ranks, r.Backend, r.Version, r.Device, how)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "size\tcount\ttime (us)\tskew (us)\tslowest (us)\talgbw (GB/s)\tbusbw (GB/s)\t")
	for _, row := range r.Rows {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.1f\t%.3f\t%.3f\t\n", humanBytes(row.Bytes), row.Count,
			row.MS*1e3, row.SkewMS*1e3, row.SlowestMS*1e3, row.AlgBWGBs, row.BusBWGBs)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.Interference == 0 {
		return nil
	}
	fmt.Fprintf(w, "\ncompute beside the collectives (%d pairs of a loop alone and beside; per rank the median pair, the mean over ranks):\n", r.Interference)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "size\tcollectives\tloop alone (ms)\tloop beside (ms)\tcollective (ms)\tcompute lost (ms)\tfraction\t")
	for _, row := range r.Rows {
		if c := row.Compute; c != nil {
			fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.3f\t%.3f\t%.2f\t\n", humanBytes(row.Bytes), c.Collectives,
				c.AloneMS, c.BesideMS, c.CommMS, c.StealMS, c.Fraction)
		}
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
