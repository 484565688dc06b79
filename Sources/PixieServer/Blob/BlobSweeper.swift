import Foundation
import Storage

#if canImport(Glibc)
    import Glibc
#endif

extension BlobService {
    /// Deletes every blob whose TTL has passed (row and file) and the budgets of past hours; returns how many
    /// blobs it deleted. ``runSweeper()`` calls it every ``Configuration/sweepInterval``.
    @discardableResult
    public func sweep() throws -> Int {
        let now = clock.now().unixSeconds
        let expired = try database.query("SELECT blob_id FROM blobs WHERE expires_at <= ?", [.integer(now)])
            .map { row throws(StorageError) in try row.string("blob_id") }
        var deleted = 0
        for blobID in expired {
            // The row goes first: a GET that still finds the file also finds no row, and answers 404.
            guard try database.execute("DELETE FROM blobs WHERE blob_id = ?", [.text(blobID)]) > 0 else { continue }
            configuration.store.delete(blobID)
            deleted += 1
        }
        try database.execute("DELETE FROM blob_budgets WHERE window_start < ?", [.integer(Self.window(clock.now()))])
        if deleted > 0 {
            metrics.increment("pixie_blob_deleted_total", by: Double(deleted), labels: ["reason": "expired"])
            logger.info("swept expired blobs", ["count": deleted])
        }
        return deleted
    }

    /// Removes what a crash can leave behind, once untouched for ``Configuration/orphanAge``: uploads left
    /// midway, and bytes with no row (made durable, then the row was never written). Runs with every sweep.
    @discardableResult
    public func removeOrphans() throws -> Int {
        let removed = try configuration.store.removeOrphans(untouchedFor: configuration.orphanAge) { blobID in
            try database.queryOne("SELECT 1 AS known FROM blobs WHERE blob_id = ?", [.text(blobID)]) != nil
        }
        if removed > 0 { logger.warning("removed files left by interrupted uploads", ["count": removed]) }
        return removed
    }

    /// Removes orphans and sweeps, now and then every ``Configuration/sweepInterval`` until the task is
    /// cancelled. A failed sweep is logged and retried at the next interval. Every node of a deployment may run
    /// it on a shared store: a row is deleted before its bytes, by whichever node gets there first.
    public func runSweeper() async {
        while !Task.isCancelled {
            do {
                try removeOrphans()
            } catch {
                logger.error("the orphan sweep failed", ["error": "\(error)"])
            }
            do {
                try await Task.sleep(for: configuration.sweepInterval)
            } catch {
                return
            }
            do {
                try sweep()
            } catch {
                logger.error("the blob sweep failed", ["error": "\(error)"])
            }
        }
    }
}
