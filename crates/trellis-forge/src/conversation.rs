//! The pull request's conversation as feedback: issue comments (new or edited, Trellis's own
//! report comments excluded) and the summary text of reviews that do not request changes.

use crate::comments::is_report_comment;
use crate::item::FeedbackItem;
use crate::models::{Review, login};
use crate::{ForgeError, GitHub, RepoRef};

/// Review summaries: every submitted review with a non-empty body that is not a change
/// request (those are [`FeedbackItem::ChangesRequested`]), pending or dismissed.
pub(crate) fn review_summaries(reviews: &[Review]) -> Vec<FeedbackItem> {
    reviews
        .iter()
        .filter(|r| matches!(r.state.as_str(), "COMMENTED" | "APPROVED"))
        .filter_map(|r| {
            let body = r.body.as_deref().unwrap_or_default().trim();
            (!body.is_empty()).then(|| FeedbackItem::ReviewSummary {
                review_id: r.id,
                author: login(r.user.as_ref()),
                state: r.state.clone(),
                body: body.to_owned(),
                url: r.html_url.clone(),
            })
        })
        .collect()
}

impl GitHub {
    /// The pull request's conversation comments as feedback items, oldest first; comments
    /// carrying a Trellis report marker and empty ones are left out.
    pub(crate) async fn conversation_items(
        &self,
        repo: &RepoRef,
        number: u64,
    ) -> Result<Vec<FeedbackItem>, ForgeError> {
        let comments = self.issue_comments(repo, number).await?;
        Ok(comments
            .into_iter()
            .filter_map(|c| {
                let body = c.body.unwrap_or_default();
                if body.trim().is_empty() || is_report_comment(&body) {
                    return None;
                }
                Some(FeedbackItem::Comment {
                    comment_id: c.id,
                    author: login(c.user.as_ref()),
                    updated_at: c
                        .updated_at
                        .or(c.created_at)
                        .unwrap_or_else(|| crate::comments::body_hash(&body)),
                    body,
                    url: c.html_url,
                })
            })
            .collect())
    }
}
