//go:build unix

package rawio

import (
	"io"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// BenchmarkPingPong sends 64 bytes to cat, another process, over a pipe
// and reads them back over another, through os.File and through File:
// a relayed request's shape, where this process goes idle while the
// other works. It runs at one P (as internal/cores sets for a relay),
// and reports besides the time this process's CPU and context switches
// per round trip (its threads': sysmon's wake-ups count here).
func BenchmarkPingPong(b *testing.B) {
	for _, raw := range []bool{false, true} {
		name := "os.File"
		if raw {
			name = "rawio.File"
		}
		b.Run(name, func(b *testing.B) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
			toCat, w := pipe(b)
			r, fromCat := pipe(b)
			cat := exec.Command("cat")
			cat.Stdin, cat.Stdout = toCat, fromCat
			if err := cat.Start(); err != nil {
				b.Fatal(err)
			}
			toCat.Close()
			fromCat.Close()
			defer cat.Wait()
			var in io.Reader = r
			var out io.WriteCloser = w
			if raw {
				in, out = File(r), File(w)
			}
			defer out.Close()
			msg, buf := make([]byte, 64), make([]byte, 64)
			var u0 syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_SELF, &u0)
			b.ResetTimer()
			for range b.N {
				out.Write(msg)
				if _, err := io.ReadFull(in, buf); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			var u1 syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_SELF, &u1)
			cpu := time.Duration(u1.Utime.Nano() + u1.Stime.Nano() - u0.Utime.Nano() - u0.Stime.Nano())
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(u1.Nvcsw+u1.Nivcsw-u0.Nvcsw-u0.Nivcsw)/float64(b.N), "switches/op")
		})
	}
}
