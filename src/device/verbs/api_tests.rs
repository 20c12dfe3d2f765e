//! The inline verbs of `api` on a real device: two RC QPs of the first device connected to
//! each other, a send, a type 2 window bound by a posted work request, an RDMA write
//! through it, completion events, an SRQ, and both ways of querying a port.
//!
//! It needs an RDMA device, so it is ignored by a plain `cargo test`; `make check-vm` runs
//! it inside the Soft-RoCE VM (tests/vm/suite.sh runs the ignored tests under
//! `device::verbs::`), where a missing device fails it. By hand:
//! `tests/vm/run.sh target/release/deps/dat2-<hash> --ignored device::verbs:: --nocapture`.

use core::ffi::c_void;
use core::ptr;
use std::time::{Duration, Instant};

use super::*;

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
