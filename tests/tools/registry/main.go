// The image registry of the test cluster's real nodes (hack/control-plane/real-node.sh): the
// Distribution project's registry, unmodified, with only the storage a test needs (the
// filesystem driver). Its own command (cmd/registry) also links the cloud storage drivers (S3,
// Azure, GCS) and their SDKs, which would triple the build for nothing a test uses; the command
// line is the same (`registry serve CONFIG`).
package main

import (
	"os"

	"github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
)

func main() {
	if err := registry.RootCmd.Execute(); err != nil {
		os.Exit(1)
	}
}
