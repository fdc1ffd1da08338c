// drakubelet: kubelet's side of a DRA driver, written with the stubs Kubernetes publishes in
// k8s.io/kubelet (pkg/apis/pluginregistration/v1 and pkg/apis/dra/v1), never Tessera's copy of
// the protos. kube_dra_test runs it against a `tessera dra-driver` process. Every command prints
// one JSON object on stdout and exits 0 when the RPC itself succeeded (per-claim errors are in
// the JSON), 1 otherwise.
//
//	drakubelet info -socket REG.sock                    GetInfo, then NotifyRegistrationStatus(true)
//	drakubelet prepare -socket DRA.sock -claims NS/NAME/UID[,NS/NAME/UID...]
//	drakubelet unprepare -socket DRA.sock -claims NS/NAME/UID[,...]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "drakubelet: "+format+"\n", args...)
	os.Exit(1)
}

func claims(spec string) []*drapb.Claim {
	var out []*drapb.Claim
	for _, c := range strings.Split(spec, ",") {
		parts := strings.Split(c, "/")
		if len(parts) != 3 {
			fail("-claims: expected NS/NAME/UID, got %q", c)
		}
		out = append(out, &drapb.Claim{Namespace: parts[0], Name: parts[1], Uid: parts[2]})
	}
	return out
}

func emit(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		fail("%v", err)
	}
	fmt.Println(string(b))
}

func main() {
	if len(os.Args) < 2 {
		fail("usage: drakubelet info|prepare|unprepare -socket PATH [-claims ...]")
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	socket := fs.String("socket", "", "the driver's Unix socket")
	spec := fs.String("claims", "", "NS/NAME/UID[,...]")
	fs.Parse(os.Args[2:])
	conn, err := grpc.NewClient("unix://"+*socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fail("%v", err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	switch os.Args[1] {
	case "info":
		c := registerapi.NewRegistrationClient(conn)
		info, err := c.GetInfo(ctx, &registerapi.InfoRequest{})
		if err != nil {
			fail("GetInfo: %v", err)
		}
		if _, err := c.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
			fail("NotifyRegistrationStatus: %v", err)
		}
		emit(map[string]any{"type": info.Type, "name": info.Name, "endpoint": info.Endpoint,
			"supported_versions": info.SupportedVersions})
	case "prepare":
		resp, err := drapb.NewDRAPluginClient(conn).NodePrepareResources(ctx,
			&drapb.NodePrepareResourcesRequest{Claims: claims(*spec)})
		if err != nil {
			fail("NodePrepareResources: %v", err)
		}
		out := map[string]any{}
		for uid, r := range resp.Claims {
			var devices []map[string]any
			for _, d := range r.Devices {
				devices = append(devices, map[string]any{"request_names": d.RequestNames,
					"pool_name": d.PoolName, "device_name": d.DeviceName, "cdi_device_ids": d.CdiDeviceIds})
			}
			out[uid] = map[string]any{"devices": devices, "error": r.Error}
		}
		emit(out)
	case "unprepare":
		resp, err := drapb.NewDRAPluginClient(conn).NodeUnprepareResources(ctx,
			&drapb.NodeUnprepareResourcesRequest{Claims: claims(*spec)})
		if err != nil {
			fail("NodeUnprepareResources: %v", err)
		}
		out := map[string]any{}
		for uid, r := range resp.Claims {
			out[uid] = map[string]any{"error": r.Error}
		}
		emit(out)
	default:
		fail("unknown command %q", os.Args[1])
	}
}
