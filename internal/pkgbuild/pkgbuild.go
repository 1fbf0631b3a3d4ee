package pkgbuild

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the deb packager
	"github.com/goreleaser/nfpm/v2/files"
	_ "github.com/goreleaser/nfpm/v2/rpm" // registers the rpm packager
)

// The installed layout. The unit goes where each family's systemd looks
// for a package's units: Debian installs them under /lib until its /usr
// merge is complete in dpkg's database, Fedora and RHEL under /usr/lib.
const (
	BinaryPath  = "/usr/bin/ringlog"
	ConfigPath  = "/etc/ringlog/server.properties"
	DataDir     = "/var/lib/ringlog"
	UnitDebPath = "/lib/systemd/system/ringlog.service"
	UnitRPMPath = "/usr/lib/systemd/system/ringlog.service"
	User        = "ringlog"
)

// Formats are the package formats Build makes.
var Formats = []string{"deb", "rpm"}

//go:embed files
var packaged embed.FS

// Options say what to package.
type Options struct {
	// Binary is the ringlog binary to install as BinaryPath, built for
	// Arch (scripts/package.sh builds it static, CGO_ENABLED=0).
	Binary string
	// Version is the package version: Debian's and RPM's rules (digits
	// first; ~ sorts before anything, so 0.1.0~rc1 < 0.1.0).
	Version string
	// Arch is GOARCH (amd64, arm64); nfpm maps it to each format's name.
	Arch string
	// OutDir receives the packages, named by each format's convention.
	OutDir string
	// Formats to make: "deb", "rpm"; empty: all of Formats.
	Formats []string
	// MTime is every file's time in the packages (scripts/package.sh
	// gives the commit's, so that a commit makes the same bytes); zero:
	// now.
	MTime time.Time
}

// Build writes one package per format into OutDir and returns their
// paths.
func Build(o Options) ([]string, error) {
	if o.Binary == "" || o.Version == "" || o.Arch == "" || o.OutDir == "" {
		return nil, errors.New("pkgbuild: Binary, Version, Arch and OutDir are all needed")
	}
	if st, err := os.Stat(o.Binary); err != nil {
		return nil, fmt.Errorf("pkgbuild: the binary: %w", err)
	} else if st.Mode()&0o111 == 0 {
		return nil, fmt.Errorf("pkgbuild: %s is not executable", o.Binary)
	}
	formats := o.Formats
	if len(formats) == 0 {
		formats = Formats
	}
	// nfpm reads contents and scripts from files: the embedded ones are
	// written out for the time of the build.
	src, err := os.MkdirTemp("", "ringlog-pkgbuild-")
	if err != nil {
		return nil, fmt.Errorf("pkgbuild: %w", err)
	}
	defer os.RemoveAll(src)
	if err := writeEmbedded(src); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("pkgbuild: %w", err)
	}
	var out []string
	for _, format := range formats {
		p, err := buildOne(o, format, src)
		if err != nil {
			return out, err
		}
		out = append(out, p)
	}
	return out, nil
}

func writeEmbedded(dir string) error {
	return fs.WalkDir(packaged, "files", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := packaged.ReadFile(path)
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(path, ".sh") {
			mode = 0o755
		}
		return os.WriteFile(filepath.Join(dir, filepath.Base(path)), b, mode)
	})
}

// info describes the package; a fresh one per format, since nfpm's
// PrepareForPackager rewrites the contents for the format it is given.
func info(o Options, src string) *nfpm.Info {
	in := func(name string) string { return filepath.Join(src, name) }
	return nfpm.WithDefaults(&nfpm.Info{
		Name:          "ringlog",
		Arch:          o.Arch,
		Platform:      "linux",
		Version:       o.Version,
		MTime:         o.MTime,
		VersionSchema: "none", // taken as given, not parsed as semver
		Section:       "net",
		Priority:      "optional",
		Maintainer:    "ringlog developers",
		Description: "Kafka-wire-protocol log broker for bare-metal Linux\n" +
			"ringlog speaks Apache Kafka's protocol to any Kafka client, storing\n" +
			"partitions in Kafka's on-disk layout, writing through io_uring and\n" +
			"serving fetches with sendfile. This package installs the broker, its\n" +
			"systemd unit and a default configuration.",
		Overridables: nfpm.Overridables{
			Contents: files.Contents{
				{Source: o.Binary, Destination: BinaryPath, FileInfo: &files.ContentFileInfo{Mode: 0o755}},
				// A conffile: dpkg keeps the operator's edits on upgrade
				// (asking when both changed) and on remove, deleting it on
				// purge only; rpm keeps an edited one and writes the new
				// one beside it (noreplace).
				{Source: in("server.properties"), Destination: ConfigPath, Type: files.TypeConfigNoReplace,
					FileInfo: &files.ContentFileInfo{Mode: 0o644}},
				{Source: in("ringlog.service"), Destination: UnitDebPath, Packager: "deb",
					FileInfo: &files.ContentFileInfo{Mode: 0o644}},
				{Source: in("ringlog.service"), Destination: UnitRPMPath, Packager: "rpm",
					FileInfo: &files.ContentFileInfo{Mode: 0o644}},
			},
			// The data directory is not in the package: the postinstall
			// script makes it, so that no package manager removes it.
			Scripts: nfpm.Scripts{
				PostInstall: in("postinstall.sh"),
				PreRemove:   in("preremove.sh"),
				PostRemove:  in("postremove.sh"),
			},
			// useradd and groupadd (the postinstall script).
			Depends: []string{"passwd"},
			// zstd: several times faster to make and to unpack than gzip
			// (nfpm's .deb default is gzip -9), and a little smaller. It
			// needs dpkg 1.21.18 or newer (Debian 12; Ubuntu's own packages
			// are zstd since 21.10) and rpm 4.14 (RHEL 8, Fedora).
			Deb: nfpm.Deb{Compression: "zstd"},
			RPM: nfpm.RPM{Summary: "Kafka-wire-protocol log broker", Group: "System Environment/Daemons", Compression: "zstd"},
		},
	})
}

func buildOne(o Options, format, src string) (string, error) {
	packager, err := nfpm.Get(format)
	if err != nil {
		return "", fmt.Errorf("pkgbuild: %w", err)
	}
	inf := info(o, src)
	if format == "rpm" {
		// RPM's package of useradd is shadow-utils.
		inf.Depends = []string{"shadow-utils"}
	}
	if err := nfpm.PrepareForPackager(inf, format); err != nil {
		return "", fmt.Errorf("pkgbuild: %s: %w", format, err)
	}
	path := filepath.Join(o.OutDir, packager.ConventionalFileName(inf))
	f, err := os.Create(path)
	if err != nil {
		return "", fmt.Errorf("pkgbuild: %w", err)
	}
	if err := packager.Package(inf, f); err != nil {
		f.Close()
		os.Remove(path)
		return "", fmt.Errorf("pkgbuild: %s: %w", format, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("pkgbuild: %w", err)
	}
	return path, nil
}
