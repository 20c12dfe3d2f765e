//! The inline verbs of `api` on a real device: two RC QPs of the first device connected to
//! each other, a send, a type 2 window bound by a posted work request, an RDMA write
//! through it, completion events, an SRQ, and both ways of querying a port.
//!
//! It needs an RDMA device, so it is ignored by a plain `cargo test`; `make check-vm` runs
//! it inside the Soft-RoCE VM (tests/vm/suite.sh runs the ignored tests under
//! `device::verbs::`), where a missing device fails it. By hand:
//! `tests/vm/run.sh target/release/deps/dat2-<hash> --ignored device::verbs:: --nocapture`.

use core::ffi::{c_int, c_void};
use core::ptr;
use std::time::{Duration, Instant};

use super::{
    alloc_mw, api, bind_mw, dealloc_mw, extended, inc_rkey, poll_cq, post_recv, post_send, post_srq_recv, req_notify_cq, Api, DeviceList,
};
use crate::device::verbs::sys::{
    ibv_ah_attr, ibv_comp_channel, ibv_context, ibv_cq, ibv_gid, ibv_global_route, ibv_mr, ibv_mw_bind, ibv_mw_bind_info, ibv_pd,
    ibv_port_attr, ibv_qp, ibv_qp_attr, ibv_qp_cap, ibv_qp_init_attr, ibv_recv_wr, ibv_send_wr, ibv_sge, ibv_srq_attr, ibv_srq_init_attr,
    ibv_wc, IBV_ACCESS_LOCAL_WRITE, IBV_ACCESS_MW_BIND, IBV_ACCESS_REMOTE_READ, IBV_ACCESS_REMOTE_WRITE, IBV_MTU_1024, IBV_MW_TYPE_2,
    IBV_PORT_ACTIVE, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QPT_RC, IBV_QP_ACCESS_FLAGS, IBV_QP_AV, IBV_QP_DEST_QPN,
    IBV_QP_MAX_DEST_RD_ATOMIC, IBV_QP_MAX_QP_RD_ATOMIC, IBV_QP_MIN_RNR_TIMER, IBV_QP_PATH_MTU, IBV_QP_PKEY_INDEX, IBV_QP_PORT,
    IBV_QP_RETRY_CNT, IBV_QP_RNR_RETRY, IBV_QP_RQ_PSN, IBV_QP_SQ_PSN, IBV_QP_STATE, IBV_QP_TIMEOUT, IBV_SEND_SIGNALED, IBV_WC_BIND_MW,
    IBV_WC_RDMA_WRITE, IBV_WC_RECV, IBV_WC_SEND, IBV_WC_SUCCESS, IBV_WR_BIND_MW, IBV_WR_RDMA_WRITE, IBV_WR_SEND,
};

const PORT: u8 = 1;

/// An RC QP with its own CQ, moved to INIT.
struct End {
    cq: *mut ibv_cq,
    qp: *mut ibv_qp,
}

fn end(api: &Api, ctx: *mut ibv_context, pd: *mut ibv_pd, channel: *mut ibv_comp_channel) -> End {
    // SAFETY: `ctx`, `pd` and `channel` are live; the attribute structures are local.
    unsafe {
        let cq = (api.ibv.create_cq)(ctx, 16, ptr::null_mut(), channel, 0);
        assert!(!cq.is_null(), "ibv_create_cq: {}", std::io::Error::last_os_error());
        let mut init = ibv_qp_init_attr {
            send_cq: cq,
            recv_cq: cq,
            cap: ibv_qp_cap { max_send_wr: 8, max_recv_wr: 8, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 },
            qp_type: IBV_QPT_RC,
            ..Default::default()
        };
        let qp = (api.ibv.create_qp)(pd, &mut init);
        assert!(!qp.is_null(), "ibv_create_qp: {}", std::io::Error::last_os_error());
        let mut attr = ibv_qp_attr {
            qp_state: IBV_QPS_INIT,
            pkey_index: 0,
            port_num: PORT,
            qp_access_flags: IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
            ..Default::default()
        };
        let mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
        assert_eq!((api.ibv.modify_qp)(qp, &mut attr, mask as c_int), 0, "to INIT");
        End { cq, qp }
    }
}

/// Moves `qp` to RTR then RTS, connected to the QP numbered `remote` on the same port.
fn connect(api: &Api, qp: *mut ibv_qp, remote: u32, gid: ibv_gid, gid_index: u8) {
    let mut attr = ibv_qp_attr {
        qp_state: IBV_QPS_RTR,
        path_mtu: IBV_MTU_1024,
        dest_qp_num: remote,
        rq_psn: 0,
        max_dest_rd_atomic: 1,
        min_rnr_timer: 12,
        ah_attr: ibv_ah_attr {
            grh: ibv_global_route { dgid: gid, sgid_index: gid_index, hop_limit: 1, ..Default::default() },
            is_global: 1,
            port_num: PORT,
            ..Default::default()
        },
        ..Default::default()
    };
    let mask =
        IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    // SAFETY: `qp` is live and `attr` local.
    assert_eq!(unsafe { (api.ibv.modify_qp)(qp, &mut attr, mask as c_int) }, 0, "to RTR");
    let mut attr =
        ibv_qp_attr { qp_state: IBV_QPS_RTS, timeout: 14, retry_cnt: 7, rnr_retry: 7, sq_psn: 0, max_rd_atomic: 1, ..Default::default() };
    let mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;
    // SAFETY: as above.
    assert_eq!(unsafe { (api.ibv.modify_qp)(qp, &mut attr, mask as c_int) }, 0, "to RTS");
}

/// Polls `cq` through the inline `poll_cq` until one completion arrives (5 s at most).
fn wait_one(cq: *mut ibv_cq) -> ibv_wc {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut wc = ibv_wc::default();
    loop {
        // SAFETY: `cq` is live and `wc` has room for one entry.
        let n = unsafe { poll_cq(cq, 1, &mut wc) };
        assert!(n >= 0, "ibv_poll_cq: {n}");
        if n == 1 {
            return wc;
        }
        assert!(Instant::now() < deadline, "no completion within 5 s");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn sge(buf: &mut [u8], mr: *mut ibv_mr) -> ibv_sge {
    // SAFETY: `mr` is a live registration.
    ibv_sge { addr: buf.as_mut_ptr() as u64, length: buf.len() as u32, lkey: unsafe { (*mr).lkey } }
}

#[test]
#[ignore = "needs an RDMA device: run by make check-vm"]
fn on_a_device_the_inline_verbs_work() {
    let api = api().expect("rdma-core loads");
    let list = DeviceList::new(api).unwrap_or_else(|e| panic!("no RDMA support in the kernel: ibv_get_device_list: errno {e}"));
    let &dev = list.devices().first().expect("an RDMA device");
    eprintln!("device {}", list.name(0).unwrap_or_default());

    // SAFETY: every pointer handed to rdma-core below is either one it returned and that is
    // still live, or a local structure or buffer that outlives the call using it; buffers
    // registered for remote access outlive their registrations and windows.
    unsafe {
        let ctx = (api.ibv.open_device)(dev);
        assert!(!ctx.is_null());
        drop(list);

        // query_port both ways: the extended op (full layout) and the exported function.
        assert!(extended(ctx).is_some(), "libibverbs 44 always embeds the context");
        let mut full = ibv_port_attr { port_cap_flags2: 0xdead, ..Default::default() };
        assert_eq!(api.query_port(ctx, PORT, &mut full), 0);
        let mut old = ibv_port_attr { port_cap_flags2: 0xbeef, ..Default::default() };
        assert_eq!((api.ibv.query_port)(ctx, PORT, &mut old), 0);
        assert_eq!((full.state, full.active_mtu, full.link_layer), (old.state, old.active_mtu, old.link_layer));
        assert_eq!(old.port_cap_flags2, 0xbeef, "the exported function writes only the old layout");
        assert_ne!(full.port_cap_flags2, 0xdead, "the extended op writes the whole structure");
        assert_eq!(full.state, IBV_PORT_ACTIVE);

        // The loopback address: an IPv4-mapped GID if there is one (a link-local IPv6 GID
        // may still be tentative just after boot, and then the move to RTR times out),
        // else the first GID in use.
        let gids: Vec<(u8, ibv_gid)> = (0..full.gid_tbl_len.min(16))
            .filter_map(|i| {
                let mut gid = ibv_gid::default();
                let ok = (api.ibv.query_gid)(ctx, PORT, i, &mut gid) == 0 && gid.raw != [0; 16];
                ok.then_some((i as u8, gid))
            })
            .collect();
        let v4_mapped = |g: &ibv_gid| g.raw[..12] == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff];
        let (gid_index, gid) = *gids.iter().find(|(_, g)| v4_mapped(g)).or(gids.first()).expect("a GID on port 1");
        let pd = (api.ibv.alloc_pd)(ctx);
        assert!(!pd.is_null());
        let channel = (api.ibv.create_comp_channel)(ctx);
        assert!(!channel.is_null());
        let a = end(api, ctx, pd, ptr::null_mut());
        let b = end(api, ctx, pd, channel);
        connect(api, a.qp, (*b.qp).qp_num, gid, gid_index);
        connect(api, b.qp, (*a.qp).qp_num, gid, gid_index);

        let mut src = *b"hello, verbs....";
        let mut dst = [0u8; 64];
        let access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_MW_BIND;
        let src_mr = (api.ibv.reg_mr)(pd, src.as_mut_ptr().cast(), src.len(), IBV_ACCESS_LOCAL_WRITE as c_int);
        let dst_mr = (api.ibv.reg_mr)(pd, dst.as_mut_ptr().cast(), dst.len(), access as c_int);
        assert!(!src_mr.is_null() && !dst_mr.is_null());

        // A send from a to b, with b's CQ armed: the completion raises a channel event.
        assert_eq!(req_notify_cq(b.cq, false), 0);
        let mut rsge = sge(&mut dst, dst_mr);
        let mut rwr = ibv_recv_wr { wr_id: 7, sg_list: &mut rsge, num_sge: 1, ..Default::default() };
        let mut bad_r: *mut ibv_recv_wr = ptr::null_mut();
        assert_eq!(post_recv(b.qp, &mut rwr, &mut bad_r), 0);
        let mut ssge = sge(&mut src, src_mr);
        let mut swr = ibv_send_wr {
            wr_id: 1,
            sg_list: &mut ssge,
            num_sge: 1,
            opcode: IBV_WR_SEND,
            send_flags: IBV_SEND_SIGNALED,
            ..Default::default()
        };
        let mut bad_s: *mut ibv_send_wr = ptr::null_mut();
        assert_eq!(post_send(a.qp, &mut swr, &mut bad_s), 0);
        let wc = wait_one(a.cq);
        assert_eq!((wc.status, wc.opcode, wc.wr_id), (IBV_WC_SUCCESS, IBV_WC_SEND, 1));
        let mut pfd = libc::pollfd { fd: (*channel).fd, events: libc::POLLIN, revents: 0 };
        assert_eq!(libc::poll(&mut pfd, 1, 5000), 1, "a completion event on b's channel");
        let (mut ev_cq, mut ev_ctx) = (ptr::null_mut(), ptr::null_mut::<c_void>());
        assert_eq!((api.ibv.get_cq_event)(channel, &mut ev_cq, &mut ev_ctx), 0);
        assert_eq!(ev_cq, b.cq);
        (api.ibv.ack_cq_events)(b.cq, 1);
        let wc = wait_one(b.cq);
        assert_eq!((wc.status, wc.opcode, wc.wr_id, wc.byte_len), (IBV_WC_SUCCESS, IBV_WC_RECV, 7, 16));
        assert_eq!(&dst[..16], b"hello, verbs....");

        // A type 2 window over b's buffer, bound by a work request on b's QP with a fresh
        // key; a writes through it. The inline bind_mw refuses type 2, as the header does.
        let mw = alloc_mw(pd, IBV_MW_TYPE_2);
        assert!(!mw.is_null(), "ibv_alloc_mw: {}", std::io::Error::last_os_error());
        let mut bind = ibv_mw_bind {
            wr_id: 0,
            send_flags: IBV_SEND_SIGNALED,
            bind_info: ibv_mw_bind_info {
                mr: dst_mr,
                addr: dst.as_ptr() as u64 + 32,
                length: 32,
                mw_access_flags: IBV_ACCESS_REMOTE_WRITE,
            },
        };
        assert_eq!(bind_mw(b.qp, mw, &mut bind), libc::EINVAL);
        let old_rkey = (*mw).rkey;
        let rkey = inc_rkey(old_rkey);
        let mut bwr = ibv_send_wr { wr_id: 2, opcode: IBV_WR_BIND_MW, send_flags: IBV_SEND_SIGNALED, ..Default::default() };
        bwr.__bindgen_anon_2.bind_mw.mw = mw;
        bwr.__bindgen_anon_2.bind_mw.rkey = rkey;
        bwr.__bindgen_anon_2.bind_mw.bind_info = bind.bind_info;
        assert_eq!(post_send(b.qp, &mut bwr, &mut bad_s), 0);
        let wc = wait_one(b.cq);
        assert_eq!((wc.status, wc.opcode, wc.wr_id), (IBV_WC_SUCCESS, IBV_WC_BIND_MW, 2));
        // For a type 2 window the consumer keeps the key it chose: rxe leaves `(*mw).rkey`
        // at the old value after a posted bind.
        assert_eq!((*mw).rkey, old_rkey);

        let mut wwr = ibv_send_wr {
            wr_id: 3,
            sg_list: &mut ssge,
            num_sge: 1,
            opcode: IBV_WR_RDMA_WRITE,
            send_flags: IBV_SEND_SIGNALED,
            ..Default::default()
        };
        wwr.wr.rdma.remote_addr = dst.as_ptr() as u64 + 40;
        wwr.wr.rdma.rkey = rkey;
        assert_eq!(post_send(a.qp, &mut wwr, &mut bad_s), 0);
        let wc = wait_one(a.cq);
        assert_eq!((wc.status, wc.opcode, wc.wr_id), (IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 3));
        assert_eq!(&dst[40..56], b"hello, verbs....");
        assert_eq!(dealloc_mw(mw), 0);

        // An SRQ takes receives through the inline post_srq_recv.
        let mut sattr = ibv_srq_init_attr { attr: ibv_srq_attr { max_wr: 4, max_sge: 1, srq_limit: 0 }, ..Default::default() };
        let srq = (api.ibv.create_srq)(pd, &mut sattr);
        assert!(!srq.is_null());
        let mut rwr = ibv_recv_wr { wr_id: 9, sg_list: &mut rsge, num_sge: 1, ..Default::default() };
        assert_eq!(post_srq_recv(srq, &mut rwr, &mut bad_r), 0);
        let mut q = ibv_srq_attr::default();
        assert_eq!((api.ibv.query_srq)(srq, &mut q), 0);
        assert!(q.max_wr >= 4);
        assert_eq!((api.ibv.destroy_srq)(srq), 0);

        for e in [a, b] {
            assert_eq!((api.ibv.destroy_qp)(e.qp), 0);
            assert_eq!((api.ibv.destroy_cq)(e.cq), 0);
        }
        assert_eq!((api.ibv.dereg_mr)(src_mr), 0);
        assert_eq!((api.ibv.dereg_mr)(dst_mr), 0);
        assert_eq!((api.ibv.destroy_comp_channel)(channel), 0);
        assert_eq!((api.ibv.dealloc_pd)(pd), 0);
        assert_eq!((api.ibv.close_device)(ctx), 0);
    }
}

// ---------------------------------------------------------------------------------------------
// The UD service through the device trait: two UD QPs of one device that resolve each other
// through rdma_cm (one connects to a service point, the other accepts), then datagrams.

mod ud {
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use crate::abi::{DAT_DTO_ERR_LOCAL_LENGTH, DAT_DTO_SUCCESS};
    use crate::device::verbs::device::VerbsDevice;
    use crate::device::verbs::ud::VerbsAh;
    use crate::device::{
        Access, CmEvent, Completion, Device, ListenEvents, Listener, Mr, Pd, PendingConnection, Qp, QpCaps, QpEvents, SendWr, Service, Sge,
        Sges, Srq, SrqEvents, UdPeer, WcOp, WrOp, GRH_LEN,
    };
    use crate::util::sync::MutexExt;

    /// Everything a test QP reports, in order.
    #[derive(Default)]
    struct Seen {
        completions: Mutex<Vec<Completion>>,
        cm: Mutex<Vec<CmEvent>>,
    }

    impl QpEvents for Seen {
        fn completion(&self, c: Completion) {
            self.completions.locked().push(c);
        }
        fn cm(&self, ev: CmEvent) {
            self.cm.locked().push(ev);
        }
        fn key_live(&self, _lkey: u32) -> bool {
            true
        }
    }

    /// A service point's consumer: accepts each UD request on its QP answering `reply`, or
    /// rejects it with `reply`.
    struct Answer {
        qp: Arc<dyn Qp>,
        reply: &'static [u8],
        reject: bool,
    }

    impl ListenEvents for Answer {
        fn request(&self, conn: Arc<dyn PendingConnection>) {
            assert!(conn.datagram(), "a UD QP's connect arrives as a datagram request");
            if self.reject {
                conn.reject(self.reply);
            } else {
                conn.accept(&self.qp, self.reply).expect("accept on a UD QP");
            }
        }
    }

    struct NoLimit;
    impl SrqEvents for NoLimit {
        fn limit_reached(&self) {}
        fn key_live(&self, _lkey: u32) -> bool {
            true
        }
    }

    /// Polls the device until `what` finds something (20 s at most: TCG is slow).
    fn wait<T>(dev: &VerbsDevice, what: impl Fn() -> Option<T>) -> T {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            dev.progress();
            if let Some(v) = what() {
                return v;
            }
            assert!(Instant::now() < deadline, "nothing within 20 s");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn open() -> Arc<VerbsDevice> {
        let port =
            crate::device::verbs::probe::ports().into_iter().find(|p| p.is_active() && p.netdev.is_some()).expect("an active RDMA port");
        VerbsDevice::new(&format!("{} {}", port.device, port.port)).unwrap_or_else(|e| panic!("open {}: {e}", port.device))
    }

    fn ud_caps(max_message: u32) -> QpCaps {
        QpCaps {
            service: Service::Ud,
            max_send_wr: 8,
            max_recv_wr: 8,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_rd_atomic: 1,
            max_rd_in: 1,
            max_message,
        }
    }

    fn ud_qp(dev: &VerbsDevice, pd: Pd, srq: Option<Arc<dyn Srq>>) -> (Arc<dyn Qp>, Arc<Seen>) {
        let caps = ud_caps(dev.limits().max_ud_msg);
        let seen = Arc::new(Seen::default());
        let qp = dev.create_qp(pd, caps, srq, seen.clone()).expect("a UD QP");
        assert_eq!(qp.path(), "ud");
        assert_eq!(qp.remote(), None);
        (qp, seen)
    }

    /// The one resolution `seen` reported (waiting for it).
    fn resolved(dev: &VerbsDevice, seen: &Seen) -> (Vec<u8>, UdPeer, bool) {
        let ev = wait(dev, || seen.cm.locked().first().cloned());
        match ev {
            CmEvent::UdResolved { private_data, peer, passive } => (private_data, peer, passive),
            other => panic!("not resolved: {other:?}"),
        }
    }

    fn completion(dev: &VerbsDevice, seen: &Seen, wr_id: u64) -> Completion {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            dev.progress();
            if let Some(c) = seen.completions.locked().iter().find(|c| c.wr_id == wr_id).copied() {
                return c;
            }
            let (c, e) = (seen.completions.locked().clone(), seen.cm.locked().clone());
            assert!(Instant::now() < deadline, "no completion of {wr_id} within 20 s; completions {c:?}, events {e:?}");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// A registered buffer (kept alive by the test).
    fn buffer(dev: &VerbsDevice, pd: Pd, len: usize) -> (Vec<u8>, Mr) {
        let mut b = vec![0u8; len];
        let mr = dev.reg_mr(pd, b.as_mut_ptr() as u64, len as u64, Access::LOCAL_WRITE, false).expect("reg_mr");
        (b, mr)
    }

    fn sge(b: &[u8], mr: &Mr, from: usize, len: usize) -> Sges {
        smallvec::smallvec![Sge { addr: b.as_ptr() as u64 + from as u64, len: len as u32, lkey: mr.lkey }]
    }

    fn send(to: &UdPeer, wr_id: u64, sges: Sges) -> SendWr {
        SendWr { wr_id, op: WrOp::Send, sges, remote: None, ah: Some(to.ah.clone()), fence: false, solicited: false }
    }

    /// Two UD QPs that resolved each other: `a` connected to `b`'s service point.
    struct Pair {
        dev: Arc<VerbsDevice>,
        pd: Pd,
        a: Arc<dyn Qp>,
        a_seen: Arc<Seen>,
        b: Arc<dyn Qp>,
        b_seen: Arc<Seen>,
        /// b as a sees it, and a as b sees it.
        to_b: UdPeer,
        to_a: UdPeer,
        _sp: Box<dyn Listener>,
    }

    fn pair(b_srq: Option<Arc<dyn Srq>>, dev: Arc<VerbsDevice>, pd: Pd) -> Pair {
        let (a, a_seen) = ud_qp(&dev, pd, None);
        let (b, b_seen) = ud_qp(&dev, pd, b_srq);
        let sp =
            dev.open_ia().expect("ia").listen(0, Arc::new(Answer { qp: b.clone(), reply: b"welcome", reject: false })).expect("listen");
        let mut at = dev.address();
        at.set_port(sp.conn_qual() as u16);
        a.connect(at, u64::from(at.port()), b"hello", Some(Duration::from_secs(30))).expect("connect");
        let (pdata, to_b, passive) = resolved(&dev, &a_seen);
        assert_eq!((pdata.as_slice(), passive), (&b"welcome"[..], false), "the active side gets the accept's private data");
        let (pdata, to_a, passive) = resolved(&dev, &b_seen);
        assert_eq!((pdata.as_slice(), passive), (&b"hello"[..], true), "the passive side gets the request's private data");
        assert_eq!(to_a.addr.ip(), dev.address().ip());
        Pair { dev, pd, a, a_seen, b, b_seen, to_b, to_a, _sp: sp }
    }

    fn fresh() -> Pair {
        let dev = open();
        let pd = dev.alloc_pd().expect("a PD");
        pair(None, dev, pd)
    }

    /// What the device offers follows its transport: iWARP (siw) has no UD, atomics or
    /// immediate data, and siw ignores a zero-based iova; RoCE (rxe) has all of them. Both
    /// grant only what was asked on siw and rxe (siw places a read response through the
    /// request's own scatter entry); where a read's sink needs remote write (other iWARP
    /// devices, or `DAT2_VERBS_SINK_REMOTE_WRITE=1`) an MR with remote rights is registered
    /// twice, its rkey from the registration with exactly the asked rights. The Soft-iWARP
    /// run of make check-vm runs this test alone.
    #[test]
    #[ignore = "needs an RDMA device: run by make check-vm"]
    fn capabilities_follow_the_transport() {
        let dev = open();
        let l = dev.limits().clone();
        let pd = dev.alloc_pd().expect("a PD");
        let page = vec![0u8; 8192];
        let aligned = (page.as_ptr() as u64 + 4095) & !4095;
        let zb = dev.reg_mr(pd, aligned, 4096, Access::LOCAL_WRITE | Access::REMOTE_WRITE, true);
        if dev.iwarp {
            assert_eq!((l.max_ud_msg, l.atomics, l.immediate), (0, false, false), "iWARP: no UD, atomics or immediate data");
            assert!(!l.ib_extensions(), "iWARP: extension_supported is DAT_EXTENSION_NONE");
            assert!(l.max_sge_rd >= 1 && l.max_sge_rd <= l.max_sge);
            let forced = crate::util::env::var("DAT2_VERBS_SINK_REMOTE_WRITE").is_some_and(|v| v.trim() == "1");
            assert_eq!(dev.sink_remote_write, !dev.siw || forced, "siw's read sinks need local write only");
            let sink = if dev.sink_remote_write { Access::REMOTE_WRITE } else { Access::empty() };
            assert_eq!(dev.wire_access(Access::LOCAL_WRITE), Access::LOCAL_WRITE | sink);
            assert_eq!(dev.wire_access(Access::LOCAL_READ), Access::LOCAL_READ);
            let mr = dev.reg_mr(pd, aligned, 4096, Access::LOCAL_WRITE | Access::REMOTE_READ, false).expect("a registration");
            // An iWARP MR's lkey and rkey are its one tag: two tags mean two registrations.
            assert_eq!(mr.lkey != mr.rkey, dev.sink_remote_write, "lkey {:#x} rkey {:#x}", mr.lkey, mr.rkey);
            dev.dereg_mr(&mr);
            assert!(
                matches!(dev.create_qp(pd, ud_caps(1024), None, Arc::new(Seen::default())), Err(crate::device::DevError::NotSupported)),
                "a UD QP on iWARP"
            );
            assert!(!l.zero_based, "siw ignores the iova of a zero-based registration");
            assert!(matches!(zb, Err(crate::device::DevError::NotSupported)), "a zero-based registration on siw");
        } else {
            assert!(l.max_ud_msg > 0 && l.atomics && l.immediate && l.zero_based, "RoCE: UD, atomics, immediate data, zero-based");
            assert_eq!(dev.wire_access(Access::LOCAL_WRITE), Access::LOCAL_WRITE);
            let mr = zb.expect("a zero-based registration");
            dev.dereg_mr(&mr);
        }
        if let Ok(mr) = dev.reg_mr(pd, aligned, 4096, Access::LOCAL_WRITE, false) {
            assert_eq!(mr.rkey, 0, "a local registration hands out no rkey, even where it is remotely writable");
            dev.dereg_mr(&mr);
        } else {
            panic!("a local registration");
        }
        dev.dealloc_pd(pd);
    }

    fn verbs_ah(p: &UdPeer) -> &VerbsAh {
        p.ah.as_any().downcast_ref::<VerbsAh>().expect("the device's own address handle")
    }

    #[test]
    #[ignore = "needs an RDMA device: run by make check-vm"]
    fn ud_datagrams_both_ways_after_the_grh_area() {
        let p = fresh();
        let dev = &p.dev;
        let mtu = dev.limits().max_ud_msg;
        assert!((256..=4096).contains(&mtu) && mtu.is_power_of_two(), "max_ud_msg is the port MTU: {mtu}");
        for (peer, of) in [(&p.to_b, &p.b), (&p.to_a, &p.a)] {
            let ah = verbs_ah(peer);
            let qpn = of.as_any().downcast_ref::<crate::device::verbs::qp::VerbsQp>().unwrap().qp_num;
            assert_eq!((peer.qpn, ah.qpn, ah.qkey), (qpn, qpn, crate::device::verbs::sys::RDMA_UDP_QKEY));
            if dev.ud.ethernet {
                // RoCE routes by IP: the address handle must carry a GRH.
                assert!(ah.is_global(), "no GRH on RoCE: {ah:?}");
                assert_ne!(crate::device::verbs::ud::gid_bytes(&ah.attr.grh.dgid), [0; 16]);
                assert!(ah.attr.grh.hop_limit > 0);
            }
        }

        // a -> b through the handle a resolved, then b -> a through the one b's accept made.
        for (n, (from, from_seen, to, to_seen, dest)) in
            [(&p.a, &p.a_seen, &p.b, &p.b_seen, &p.to_b), (&p.b, &p.b_seen, &p.a, &p.a_seen, &p.to_a)].into_iter().enumerate()
        {
            let len = 200 + n * 100;
            let (mut src, smr) = buffer(dev, p.pd, len);
            src.iter_mut().enumerate().for_each(|(i, b)| *b = (i as u8).wrapping_mul(7) ^ n as u8);
            let (dst, dmr) = buffer(dev, p.pd, GRH_LEN as usize + 1024);
            to.post_recv(10 + n as u64, sge(&dst, &dmr, 0, dst.len())).expect("post_recv");
            from.post_send(&send(dest, 20 + n as u64, sge(&src, &smr, 0, len))).expect("post_send");
            let c = completion(dev, from_seen, 20 + n as u64);
            assert_eq!((c.status, c.op), (DAT_DTO_SUCCESS, WcOp::Send));
            let c = completion(dev, to_seen, 10 + n as u64);
            assert_eq!((c.status, c.op), (DAT_DTO_SUCCESS, WcOp::Recv));
            assert_eq!(c.byte_len, len as u32 + GRH_LEN, "the completed length counts the GRH area");
            assert_eq!(&dst[GRH_LEN as usize..GRH_LEN as usize + len], &src[..], "the payload follows the GRH area");
            dev.dereg_mr(&smr);
            dev.dereg_mr(&dmr);
        }
        // A datagram above the MTU is refused (rxe would send it).
        let (big, bmr) = buffer(dev, p.pd, mtu as usize + 1);
        assert!(p.a.post_send(&send(&p.to_b, 30, sge(&big, &bmr, 0, big.len()))).is_err());
        assert!(p.a.post_send(&send(&p.to_b, 31, sge(&big, &bmr, 0, mtu as usize))).is_ok());
        assert_eq!(completion(dev, &p.a_seen, 31).status, DAT_DTO_SUCCESS);
        dev.dereg_mr(&bmr);
    }

    /// A datagram longer than its receive never overruns it: an HCA completes the receive with
    /// a length error, rxe drops the datagram and leaves the receive posted (IBTA class D),
    /// and on an SRQ both complete it with a length error.
    fn too_long_for_the_receive(p: &Pair, srq: Option<&Arc<dyn Srq>>) {
        let dev = &p.dev;
        let (src, smr) = buffer(dev, p.pd, 64);
        let (dst, dmr) = buffer(dev, p.pd, GRH_LEN as usize + 64);
        let (big, bmr) = buffer(dev, p.pd, GRH_LEN as usize + 64);
        let short = sge(&dst, &dmr, 0, GRH_LEN as usize + 16);
        let post_recv = |id: u64, s: Sges| match srq {
            Some(q) => q.post_recv(id, s).unwrap(),
            None => p.b.post_recv(id, s).unwrap(),
        };
        // Room for the GRH and 16 bytes: a 64-byte datagram does not fit.
        post_recv(1, short);
        p.a.post_send(&send(&p.to_b, 2, sge(&src, &smr, 0, 64))).unwrap();
        assert_eq!(completion(dev, &p.a_seen, 2).status, DAT_DTO_SUCCESS);
        // Then a datagram that fits, and a receive of full size for it.
        post_recv(3, sge(&big, &bmr, 0, big.len()));
        p.a.post_send(&send(&p.to_b, 4, sge(&src, &smr, 0, 16))).unwrap();
        let first = completion(dev, &p.b_seen, 1);
        if first.status == DAT_DTO_SUCCESS {
            assert!(srq.is_none(), "the receive on an SRQ did not report the datagram too long for it");
            // Dropped: the short receive took the next datagram, which fits.
            assert_eq!(first.byte_len, 16 + GRH_LEN);
        } else {
            assert_eq!((first.status, first.op), (DAT_DTO_ERR_LOCAL_LENGTH, WcOp::Recv), "{first:?}");
            let c = completion(dev, &p.b_seen, 3);
            assert_eq!((c.status, c.byte_len), (DAT_DTO_SUCCESS, 16 + GRH_LEN));
        }
        assert!(dst[GRH_LEN as usize + 16..].iter().all(|&b| b == 0), "a datagram overran its receive");
        assert_eq!(p.b_seen.cm.locked().len(), 1, "a connection event after a datagram's error: {:?}", p.b_seen.cm.locked());
        for mr in [smr, dmr, bmr] {
            dev.dereg_mr(&mr);
        }
    }

    #[test]
    #[ignore = "needs an RDMA device: run by make check-vm"]
    fn ud_receive_too_short_never_overruns() {
        too_long_for_the_receive(&fresh(), None);
        let dev = open();
        let pd = dev.alloc_pd().unwrap();
        let srq = dev.create_srq(pd, 8, 1, Arc::new(NoLimit)).expect("an SRQ");
        too_long_for_the_receive(&pair(Some(srq.clone()), dev, pd), Some(&srq));
    }

    #[test]
    #[ignore = "needs an RDMA device: run by make check-vm"]
    fn ud_a_datagram_with_the_wrong_qkey_does_not_land() {
        let p = fresh();
        let dev = &p.dev;
        let right = verbs_ah(&p.to_b);
        let wrong = VerbsAh::create(dev, right.pd, right.attr, right.qpn, right.qkey ^ 0x8000_0001).expect("a second handle");
        let wrong = UdPeer { ah: wrong, qpn: p.to_b.qpn, addr: p.to_b.addr };
        let (mut src, smr) = buffer(dev, p.pd, 48);
        src.fill(0xee);
        let (dst, dmr) = buffer(dev, p.pd, GRH_LEN as usize + 64);
        p.b.post_recv(1, sge(&dst, &dmr, 0, dst.len())).unwrap();
        p.a.post_send(&send(&wrong, 2, sge(&src, &smr, 0, 48))).unwrap();
        // The sender cannot tell: a datagram completes once sent.
        assert_eq!(completion(dev, &p.a_seen, 2).status, DAT_DTO_SUCCESS);
        let until = Instant::now() + Duration::from_secs(2);
        while Instant::now() < until {
            dev.progress();
            assert!(p.b_seen.completions.locked().is_empty(), "a datagram with a wrong Q_Key was received");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(dst.iter().all(|&b| b == 0));
        // The same receive takes a datagram with the right Q_Key.
        src.fill(0x11);
        p.a.post_send(&send(&p.to_b, 3, sge(&src, &smr, 0, 24))).unwrap();
        let c = completion(dev, &p.b_seen, 1);
        assert_eq!((c.status, c.byte_len), (DAT_DTO_SUCCESS, 24 + GRH_LEN));
        assert_eq!(&dst[GRH_LEN as usize..GRH_LEN as usize + 24], &[0x11; 24]);
    }

    #[test]
    #[ignore = "needs an RDMA device: run by make check-vm"]
    fn ud_on_a_shared_receive_queue() {
        let dev = open();
        let pd = dev.alloc_pd().unwrap();
        let srq = dev.create_srq(pd, 8, 1, Arc::new(NoLimit)).expect("an SRQ");
        let p = pair(Some(srq.clone()), dev, pd);
        let dev = &p.dev;
        let (src, smr) = buffer(dev, p.pd, 100);
        let (dst, dmr) = buffer(dev, p.pd, 2 * (GRH_LEN as usize + 128));
        let half = dst.len() / 2;
        srq.post_recv(7, sge(&dst, &dmr, 0, half)).unwrap();
        srq.post_recv(8, sge(&dst, &dmr, half, half)).unwrap();
        assert_eq!(srq.available(), 2);
        for (i, len) in [(1u64, 100usize), (2, 60)] {
            p.a.post_send(&send(&p.to_b, i, sge(&src, &smr, 0, len))).unwrap();
            assert_eq!(completion(dev, &p.a_seen, i).status, DAT_DTO_SUCCESS);
        }
        let c7 = completion(dev, &p.b_seen, 7);
        let c8 = completion(dev, &p.b_seen, 8);
        assert_eq!((c7.status, c7.op, c7.byte_len), (DAT_DTO_SUCCESS, WcOp::Recv, 100 + GRH_LEN));
        assert_eq!((c8.status, c8.op, c8.byte_len), (DAT_DTO_SUCCESS, WcOp::Recv, 60 + GRH_LEN));
        assert_eq!(srq.available(), 0);
    }

    #[test]
    #[ignore = "needs an RDMA device: run by make check-vm"]
    fn ud_rejects_and_missing_service_points() {
        let dev = open();
        let pd = dev.alloc_pd().unwrap();
        let (a, a_seen) = ud_qp(&dev, pd, None);
        let (b, _b_seen) = ud_qp(&dev, pd, None);
        let sp = dev.open_ia().expect("ia").listen(0, Arc::new(Answer { qp: b.clone(), reply: b"no thanks", reject: true })).unwrap();
        let mut at = dev.address();
        at.set_port(sp.conn_qual() as u16);
        a.connect(at, u64::from(at.port()), b"may I", None).unwrap();
        let ev = wait(&dev, || a_seen.cm.locked().first().cloned());
        assert_eq!(ev, CmEvent::PeerRejected { private_data: b"no thanks".to_vec() });
        // Nobody listens there any more: rdma_cm answers, not a consumer.
        let port = sp.conn_qual() as u16;
        drop(sp);
        at.set_port(port);
        a.connect(at, u64::from(at.port()), b"anyone?", Some(Duration::from_secs(30))).unwrap();
        let ev = wait(&dev, || a_seen.cm.locked().get(1).cloned());
        assert!(matches!(ev, CmEvent::NonPeerRejected | CmEvent::Unreachable), "{ev:?}");
        // Many connects at once on one QP, each resolved once.
        let sp = dev.open_ia().expect("ia").listen(0, Arc::new(Answer { qp: b.clone(), reply: b"", reject: false })).unwrap();
        at.set_port(sp.conn_qual() as u16);
        for _ in 0..4 {
            a.connect(at, u64::from(at.port()), b"x", None).unwrap();
        }
        wait(&dev, || (a_seen.cm.locked().len() >= 6).then_some(()));
        std::thread::sleep(Duration::from_millis(300));
        dev.progress();
        let evs = a_seen.cm.locked();
        assert_eq!(evs.len(), 6);
        assert!(evs[2..].iter().all(|e| matches!(e, CmEvent::UdResolved { passive: false, .. })), "{evs:?}");
        drop(evs);
        // Ending the QP reports it once, and a connect after that is refused.
        a.disconnect(false);
        a.disconnect(true);
        assert_eq!(a_seen.cm.locked().iter().filter(|e| **e == CmEvent::Disconnected).count(), 1);
        assert!(a.connect(at, u64::from(at.port()), b"late", None).is_err());
    }
}
