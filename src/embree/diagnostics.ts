/**
 * Test and diagnostics hooks of the Embree side, kept off the package's surface (src/mod.ts does
 * not export this file): tests import it directly, so it may change in any release.
 */
import { Device } from "./device.ts";
import { accounts, liveStates } from "./state.ts";
import { deviceState } from "../internal.ts";

/**
 * Test and diagnostics only: how many of `device`'s monitor calls ran inside one of memlife's
 * synchronous native calls on the JS thread (`direct`), how many came from other threads
 * (`relayed`: TBB workers and the thread that runs a commit), how many never reached JS (`native`:
 * settled by the backend's native ledger while no JS monitor is set; always 0 with the JS ledger),
 * how many device states memlife still keeps (a device's state stays while any of its scenes is
 * alive natively), and whether the ledger is native (Bun's; Deno's and Node's prebuilt library)
 * or the JS fallback (ffi/js-ledger.ts).
 * @example
 * import { monitorDiagnostics } from "../src/embree/diagnostics.ts";
 * await scene.commit();
 * console.log(monitorDiagnostics(device)); // { direct: 2, relayed: 20, native: 0, liveDevices: 1, nativeLedger: true }
 */
export function monitorDiagnostics(
  device: Device,
): { direct: number; relayed: number; native: number; liveDevices: number; nativeLedger: boolean } {
  if (!(device instanceof Device)) throw new TypeError("monitorDiagnostics takes an rtc.Device");
  const state = Device[deviceState](device);
  return {
    direct: state.direct,
    relayed: state.relayed,
    native: state.settledNatively,
    liveDevices: liveStates(),
    nativeLedger: accounts().settlesNatively,
  };
}
