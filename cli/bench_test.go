package cli_test

import (
	"io"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/cocoonbox/cocoonbox/internal/proc"
)

// benchSize is the bytes each iteration moves: $COCOONBOX_BENCH_BYTES, else 1 GiB.
func benchSize(b *testing.B) int64 {
	if s := os.Getenv("COCOONBOX_BENCH_BYTES"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		return n
	}
	return 1 << 30
}

// zeros is an endless reader of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// BenchmarkExecCat streams benchSize bytes up through `cat` in the box and
// back down, through the real cocoonbox-ssh process, and reports the
// client's peak RSS.
func BenchmarkExecCat(b *testing.B) {
	env := startBox(b).Env
	size := benchSize(b)
	b.SetBytes(size)
	var peak int64
	for b.Loop() {
		cmd := exec.Command("cocoonbox-ssh", "main", "cat")
		cmd.Env = env
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			b.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		go func() {
			io.Copy(in, io.LimitReader(zeros{}, size))
			in.Close()
		}()
		n, err := io.Copy(io.Discard, out)
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			b.Fatal(err)
		}
		if n != size {
			b.Fatalf("got %d bytes back, want %d", n, size)
		}
		peak = max(peak, proc.PeakRSS(cmd.ProcessState))
	}
	b.ReportMetric(float64(peak)/1024, "client-peak-RSS-MiB")
}
