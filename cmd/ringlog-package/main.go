// Command ringlog-package makes ringlog's .deb and .rpm from a built
// binary (internal/pkgbuild); scripts/package.sh builds the binary and
// runs it.
//
//	ringlog-package -binary PATH -version V [-arch GOARCH] [-out DIR] [-formats deb,rpm]
//
// SOURCE_DATE_EPOCH, when set, is the time given to every file.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"ringlog/internal/pkgbuild"
)

func main() {
	binary := flag.String("binary", "", "the ringlog binary to package (built for -arch)")
	version := flag.String("version", "", "package version (Debian and RPM rules: digits first, ~ sorts before anything)")
	arch := flag.String("arch", runtime.GOARCH, "GOARCH the binary was built for")
	out := flag.String("out", "dist", "directory the packages are written to")
	formats := flag.String("formats", strings.Join(pkgbuild.Formats, ","), "package formats, comma-separated")
	flag.Parse()
	var mtime time.Time
	if v := os.Getenv("SOURCE_DATE_EPOCH"); v != "" {
		// The reproducible-builds convention: seconds since the epoch.
		sec, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			fmt.Fprintf(os.Stderr, "ringlog-package: SOURCE_DATE_EPOCH=%q: want seconds since the epoch\n", v)
			os.Exit(2)
		}
		mtime = time.Unix(sec, 0).UTC()
	}
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "ringlog-package: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	paths, err := pkgbuild.Build(pkgbuild.Options{Binary: *binary, Version: *version, Arch: *arch, OutDir: *out,
		Formats: strings.Split(*formats, ","), MTime: mtime})
	if err != nil {
		fmt.Fprintln(os.Stderr, "ringlog-package:", err)
		os.Exit(1)
	}
	for _, p := range paths {
		fmt.Println(p)
	}
}
