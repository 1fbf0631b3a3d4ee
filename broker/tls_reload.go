package broker

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"weak"
)

// keystores are the live keystores of the process, for ReloadTLS. Weak
// pointers: a keystore lives as long as the TLS configuration built on it
// (tests build many in one process), and this list does not hold it.
var keystores struct {
	mu   sync.Mutex
	list []weak.Pointer[keystore]
}

// newKeystore makes a keystore for s and registers it for ReloadTLS.
func newKeystore(s TLSSettings) *keystore {
	ks := &keystore{settings: s}
	keystores.mu.Lock()
	defer keystores.mu.Unlock()
	live := keystores.list[:0]
	for _, p := range keystores.list {
		if p.Value() != nil {
			live = append(live, p)
		}
	}
	keystores.list = append(live, weak.Make(ks))
	return ks
}

// ReloadTLS reads the keystore and truststore files of every TLS
// configuration in the process again, now: the binary calls it on SIGHUP
// (systemctl reload). Files are also re-read when their modification time
// changes (checked at most once a second, at a handshake), but a file
// replaced with its old modification time (cp -p, an archive extracted,
// a configuration tool that keeps times) or within the clock's
// granularity is seen only through this. A file that fails to load keeps
// the last good certificate serving, as with the timed reload; the
// errors are returned joined. It returns how many keystores read files.
func ReloadTLS() (int, error) {
	keystores.mu.Lock()
	var list []*keystore
	for _, p := range keystores.list {
		if ks := p.Value(); ks != nil && (ks.settings["ssl.keystore.location"] != "" || ks.settings["ssl.truststore.location"] != "") {
			list = append(list, ks)
		}
	}
	keystores.mu.Unlock()
	var errs []error
	for _, ks := range list {
		if err := ks.load(); err != nil {
			// Named by its files: the error alone may not say which.
			errs = append(errs, fmt.Errorf("broker: TLS files %s: %w", ks.files(), err))
		}
	}
	return len(list), errors.Join(errs...)
}

// files names the keystore's files, for errors.
func (ks *keystore) files() string {
	var f []string
	for _, k := range []string{"ssl.keystore.location", "ssl.truststore.location"} {
		if loc := ks.settings[k]; loc != "" {
			f = append(f, loc)
		}
	}
	return strings.Join(f, ", ")
}
