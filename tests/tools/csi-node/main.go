// csi-node is the node side of a CSI driver for the test cluster's real node
// (hack/control-plane/real-node.sh): it registers with the kubelet by the kubelet's plugin
// registration, and mounts a volume by bind-mounting a directory of --volumes-dir named by the
// volume's handle. The controller side (making those directories, snapshots as copies of them,
// restores) is the provisioner stand-in's, in the test process (outfit-test-support's
// provisioner): it can run there, the mount cannot. It exists because no CSI driver can be built
// here (csi-driver-host-path and node-driver-registrar are not on the Go module proxy).
//
// usage: csi-node --driver NAME --node-id NODE --volumes-dir DIR --endpoint SOCKET --registration SOCKET
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	registration "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

type driver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedNodeServer
	name, nodeID, volumesDir, endpoint string
}

// registrar answers the kubelet's plugin registration for the driver, as node-driver-registrar
// does.
type registrar struct {
	registration.UnimplementedRegistrationServer
	*driver
}

func (d registrar) GetInfo(context.Context, *registration.InfoRequest) (*registration.PluginInfo, error) {
	return &registration.PluginInfo{
		Type:              registration.CSIPlugin,
		Name:              d.name,
		Endpoint:          d.endpoint,
		SupportedVersions: []string{"1.0.0"},
	}, nil
}

func (d registrar) NotifyRegistrationStatus(_ context.Context, s *registration.RegistrationStatus) (*registration.RegistrationStatusResponse, error) {
	if s.PluginRegistered {
		log.Printf("registered with the kubelet as %s", d.name)
	} else {
		log.Printf("the kubelet refused the registration: %s", s.Error)
	}
	return &registration.RegistrationStatusResponse{}, nil
}

func (d *driver) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: d.name, VendorVersion: "0.1.0"}, nil
}

func (d *driver) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{}, nil
}

func (d *driver) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil
}

// No STAGE_UNSTAGE_VOLUME: the kubelet publishes each volume straight into the pod.
func (d *driver) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{}, nil
}

func (d *driver) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: d.nodeID}, nil
}

// source is the directory of the volume `handle`, which must be one name (no path).
func (d *driver) source(handle string) (string, error) {
	if handle == "" || handle == "." || handle == ".." || strings.ContainsAny(handle, "/\x00") {
		return "", status.Errorf(codes.InvalidArgument, "volume handle %q is not a directory name", handle)
	}
	path := filepath.Join(d.volumesDir, handle)
	if info, err := os.Stat(path); err != nil || !info.IsDir() {
		return "", status.Errorf(codes.NotFound, "no directory %s for volume %s", path, handle)
	}
	return path, nil
}

func mounted(target string) bool {
	mounts, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(mounts), "\n") {
		if fields := strings.Fields(line); len(fields) > 1 && fields[1] == target {
			return true
		}
	}
	return false
}

func (d *driver) NodePublishVolume(_ context.Context, r *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	source, err := d.source(r.GetVolumeId())
	if err != nil {
		return nil, err
	}
	target := r.GetTargetPath()
	if target == "" || !filepath.IsAbs(target) {
		return nil, status.Errorf(codes.InvalidArgument, "target path %q is not absolute", target)
	}
	if r.GetVolumeCapability().GetBlock() != nil {
		return nil, status.Error(codes.InvalidArgument, "block volumes are not supported")
	}
	if mounted(target) { // published already: the call is idempotent
		return &csi.NodePublishVolumeResponse{}, nil
	}
	if err := os.MkdirAll(target, 0o750); err != nil {
		return nil, status.Errorf(codes.Internal, "making %s: %v", target, err)
	}
	if err := unix.Mount(source, target, "", unix.MS_BIND, ""); err != nil {
		return nil, status.Errorf(codes.Internal, "bind-mounting %s on %s: %v", source, target, err)
	}
	if r.GetReadonly() {
		flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY)
		if err := unix.Mount("", target, "", flags, ""); err != nil {
			_ = unix.Unmount(target, 0)
			return nil, status.Errorf(codes.Internal, "making %s read-only: %v", target, err)
		}
	}
	log.Printf("published %s at %s", r.GetVolumeId(), target)
	return &csi.NodePublishVolumeResponse{}, nil
}

func (d *driver) NodeUnpublishVolume(_ context.Context, r *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	target := r.GetTargetPath()
	if target == "" || !filepath.IsAbs(target) {
		return nil, status.Errorf(codes.InvalidArgument, "target path %q is not absolute", target)
	}
	if mounted(target) {
		if err := unix.Unmount(target, 0); err != nil {
			return nil, status.Errorf(codes.Internal, "unmounting %s: %v", target, err)
		}
	}
	if err := os.Remove(target); err != nil && !os.IsNotExist(err) {
		return nil, status.Errorf(codes.Internal, "removing %s: %v", target, err)
	}
	log.Printf("unpublished %s from %s", r.GetVolumeId(), target)
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// listen on a unix socket at path, replacing a stale one.
func listen(path string) net.Listener {
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		log.Fatalf("removing the old socket %s: %v", path, err)
	}
	listener, err := net.Listen("unix", path)
	if err != nil {
		log.Fatalf("listening on %s: %v", path, err)
	}
	return listener
}

func main() {
	d := &driver{}
	var registrationSocket string
	flag.StringVar(&d.name, "driver", "", "the driver's name (its CSIDriver's)")
	flag.StringVar(&d.nodeID, "node-id", "", "the node's name")
	flag.StringVar(&d.volumesDir, "volumes-dir", "", "where each volume's directory is, named by its handle")
	flag.StringVar(&d.endpoint, "endpoint", "", "the CSI socket, which the kubelet calls")
	flag.StringVar(&registrationSocket, "registration", "", "the registration socket, in the kubelet's plugins_registry")
	flag.Parse()
	for name, value := range map[string]string{"driver": d.name, "node-id": d.nodeID, "volumes-dir": d.volumesDir,
		"endpoint": d.endpoint, "registration": registrationSocket} {
		if value == "" {
			fmt.Fprintf(os.Stderr, "csi-node: --%s is required\n", name)
			os.Exit(2)
		}
	}
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)

	node := grpc.NewServer()
	csi.RegisterIdentityServer(node, d)
	csi.RegisterNodeServer(node, d)
	csiListener := listen(d.endpoint)
	go func() { log.Fatal(node.Serve(csiListener)) }()

	// Registration last: the kubelet calls the CSI socket as soon as it learns of it.
	registering := grpc.NewServer()
	registration.RegisterRegistrationServer(registering, registrar{driver: d})
	log.Printf("serving %s at %s; registering at %s", d.name, d.endpoint, registrationSocket)
	log.Fatal(registering.Serve(listen(registrationSocket)))
}
