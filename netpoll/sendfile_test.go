package netpoll

import (
	"bytes"
	"io"
	"testing"
	"time"

	"ringlog/internal/testkit"
)

// TestSendfileShare measures how many file-region bytes go by sendfile on
// the gnet path with the drain watcher, against the simple scheme that
// copies whatever one sendfile call could not send (copyRemainder), for a
// client that reads promptly and one that reads in slow sips. The watcher
// must keep (nearly) everything on sendfile; the numbers for both are
// logged (go test -v -run SendfileShare) and quoted in doc.go.
func TestSendfileShare(t *testing.T) {
	if !gnetSupported {
		t.Skip("gnet is not supported here")
	}
	for _, tc := range []struct {
		name          string
		copyRemainder bool
		slow          bool
	}{
		{"watcher/prompt", false, false},
		{"copy-remainder/prompt", true, false},
		{"watcher/slow", false, true},
		{"copy-remainder/slow", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, data := testFile(t, 16<<20)
			h := newTestHandler(t, f)
			s := serve(t, IOGnet, Config{copyRemainder: tc.copyRemainder}, h)
			c := dial(t, s)
			const size = 4 << 20
			regions := 24
			if tc.slow {
				regions = 8
			}
			go func() {
				for i := range regions {
					c.send(fileReq(cmdFile, int64(i%4)*size, size))
				}
			}()
			buf := make([]byte, 64<<10)
			for i := range regions {
				_ = c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
				var hdr [5]byte
				if _, err := io.ReadFull(c.br, hdr[:]); err != nil {
					t.Fatal(err)
				}
				pos := int64(i%4) * size
				for got := int64(0); got < size; {
					n, err := c.br.Read(buf[:min(int64(len(buf)), size-got)])
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(buf[:n], data[pos+got:pos+got+int64(n)]) {
						t.Fatalf("region %d differs at %d", i, got)
					}
					got += int64(n)
					if tc.slow {
						time.Sleep(50 * time.Microsecond)
					}
				}
			}
			total := int64(regions) * size
			testkit.WaitFor(t, 5*time.Second, "the region counters", func() bool {
				st := s.Stats()
				return st.SendfileBytes+st.CopiedBytes == total
			})
			st := s.Stats()
			share := float64(st.SendfileBytes) / float64(total)
			t.Logf("%s: %.1f%% of %d MiB by sendfile (%d MiB copied)", tc.name, 100*share, total>>20, st.CopiedBytes>>20)
			if !tc.copyRemainder && share < 0.95 {
				t.Fatalf("sendfile share %.3f with the drain watcher, want >= 0.95", share)
			}
		})
	}
}
